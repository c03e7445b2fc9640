"""Load time, the Hearth engine beside llama.cpp, from a cold and from a warm page cache
(benchmarks/hearth_speed.py --load-runs N; each load in a fresh process).

    python -m benchmarks.hearth_speed MODEL.gguf --load-runs 3 [--json OUT.json]

Each run is one child process per engine, timed from after its imports (torch and kernels/;
llama.cpp's libraries) to the first token's id on the host:
- Hearth: the CUDA context; the header, Transformer.load (weights and the embedding table on
  the GPU, synchronized); then a paged f16 KV cache of 4096 slots (the driver's) and one token
  through the model, its argmax read back (kernels already compiled: Triton's disk cache).
- llama.cpp: llama_model_load_from_file with every layer on the GPU (its CUDA context
  included), llama_init_from_model (4096 slots, f16 KV, flash attention on), one token through
  llama_decode and the argmax of its logits.
"Load" is the first part (context + weights), "first token" all of it. Cold runs drop the page
cache first (`sync; echo 3 > /proc/sys/vm/drop_caches`, root only: without root they are left
out and said to be); warm runs follow an unmeasured load of each engine, which also compiles
Hearth's kernels once. Engines alternate within each round so that neither always runs on a
machine the other has just warmed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

N_CTX = 4096
ENGINES = ("hearth", "llama")


def drop_page_cache() -> str | None:
    """Empty the page cache; None when done, else why not."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as exc:
        return f"cannot drop the page cache ({exc.strerror}): cold runs need root"
    return None


def run_child(engine: str, model: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.hearth_speed_load", engine, model],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-400:]
        return {"error": f"{engine} child ended with {done.returncode}: {tail}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_loads(model: str, runs: int) -> dict:
    """{"warm": {"hearth": [child results], "llama": [...]}, "cold": ...}; "cold_error" when
    the page cache cannot be dropped."""
    out: dict = {"runs": runs}
    for engine in ("hearth", "llama"):  # unmeasured: file read, kernels compiled
        out[f"{engine}_first_load"] = run_child(engine, model)
    for state in ("warm", "cold"):
        rows: dict = {"hearth": [], "llama": []}
        for i in range(runs):
            order = ("hearth", "llama") if i % 2 == 0 else ("llama", "hearth")
            for engine in order:
                if state == "cold" and (why := drop_page_cache()):
                    out["cold_error"] = why
                    break
                rows[engine].append(run_child(engine, model))
        out[state] = rows
    return out


def report_loads(loads: dict) -> str:
    lines = [
        "load, each in a fresh process (s; context + weights, then to the first token's id)",
        f"{'page cache':<10} {'figure':<12} {'Hearth runs':<22} {'llama.cpp runs':<22} "
        f"{'Hearth':>7} {'llama':>7} {'ratio':>6}",
    ]
    for state in ("warm", "cold"):
        rows = loads.get(state, {})
        errors = [r["error"] for e in ENGINES for r in rows.get(e, []) if "error" in r]
        lines += [f"{state}: {e}" for e in errors]
        for figure in ("load_s", "first_token_s"):
            got = {
                e: [r[figure] for r in rows.get(e, []) if figure in r] for e in ("hearth", "llama")
            }
            if not got["hearth"] or not got["llama"]:
                continue
            ours, theirs = statistics.median(got["hearth"]), statistics.median(got["llama"])
            lines.append(
                f"{state:<10} {figure[:-2]:<12} {_runs(got['hearth']):<22} "
                f"{_runs(got['llama']):<22} {ours:7.2f} {theirs:7.2f} {ours / theirs:5.2f}x"
            )
    if "cold_error" in loads:
        lines.append(f"cold: not measured: {loads['cold_error']}")
    phases = [r for r in loads.get("warm", {}).get("hearth", []) if "weights_s" in r]
    if phases:
        last = phases[-1]
        lines.append(
            f"Hearth's warm load in parts (last run): CUDA context {last['context_s']:.2f} s, "
            f"weights {last['weights_s']:.2f} s, cache and first token {last['token_s']:.2f} s "
            f"(imports before the clock {last['imports_s']:.2f} s)"
        )
    return "\n".join(lines)


def _runs(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def hearth_child(model: str) -> dict:
    started = time.perf_counter()
    import torch

    import kernels  # noqa: F401  (Triton modules: imported before the clock, like llama's libraries)
    from benchmarks.hearth_speed import new_cache
    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import select_ops
    from engine.hearth.weights import GGUFTensors

    imported = time.perf_counter()
    with torch.inference_mode():
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        context = time.perf_counter()
        info = read_model_info(model)
        loaded = Transformer.load(model_config(info), GGUFTensors(model, info), select_ops("cuda"))
        torch.cuda.synchronize()
        weights = time.perf_counter()
        cache = new_cache(loaded, "paged-f16", N_CTX)
        one = torch.tensor([1], device="cuda")
        logits = loaded.forward(one, torch.zeros_like(one), cache, n_keys=cache.n_ctx)
        int(torch.argmax(logits))
        done = time.perf_counter()
    return {
        "imports_s": imported - started,
        "context_s": context - imported,
        "weights_s": weights - context,
        "token_s": done - weights,
        "load_s": weights - imported,
        "first_token_s": done - imported,
    }


def llama_child(model: str) -> dict:
    started = time.perf_counter()
    # llama.cpp's libraries before numpy (benchmarks/llama_ttft.py says why)
    import llama_cpp.llama_cpp as C

    C.llama_backend_init()
    imported = time.perf_counter()
    params = C.llama_model_default_params()
    params.n_gpu_layers = 999
    handle = C.llama_model_load_from_file(os.fsencode(model), params)
    if not handle:
        raise SystemExit("llama.cpp could not load the model")
    weights = time.perf_counter()
    cp = C.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = N_CTX, 512, 512
    cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
    ctx = C.llama_init_from_model(handle, cp)
    token = (C.llama_token * 1)(1)
    C.llama_decode(ctx, C.llama_batch_get_one(token, 1))
    import ctypes

    import numpy as np

    logits = C.llama_get_logits_ith(ctx, -1)
    n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(handle))
    row = ctypes.cast(logits, ctypes.POINTER(ctypes.c_float))
    int(np.argmax(np.ctypeslib.as_array(row, (n_vocab,))))
    done = time.perf_counter()
    C.llama_free(ctx)
    C.llama_model_free(handle)
    return {
        "imports_s": imported - started,
        "load_s": weights - imported,
        "first_token_s": done - imported,
    }


if __name__ == "__main__":
    engine, path = sys.argv[1], sys.argv[2]
    result = hearth_child(path) if engine == "hearth" else llama_child(path)
    print(json.dumps(result))
