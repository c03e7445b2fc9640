"""Load time, the Hearth engine beside llama.cpp, from a cold and from a warm page cache
(benchmarks/hearth_speed.py --load-runs N; each load in a fresh process).

    python -m benchmarks.hearth_speed MODEL.gguf --load-runs 3 [--json OUT.json]

Each run is one child process per engine, timed from after its imports (torch and kernels/;
llama.cpp's libraries) to the first token's id on the host:
- Hearth: the header, Transformer.load (the CUDA context made inside it, as in the app; weights
  and the embedding table on the GPU, synchronized); then a paged f16 KV cache of 4096 slots
  (the driver's) and one token through the model, its argmax read back (kernels already
  compiled: Triton's disk cache).
- llama.cpp: llama_model_load_from_file with every layer on the GPU (its CUDA context
  included), llama_init_from_model (4096 slots, f16 KV, flash attention on), one token through
  llama_decode and the argmax of its logits.
"Load" is the first part (context + weights), "first token" all of it. Cold runs drop the page
cache first (`sync; echo 3 > /proc/sys/vm/drop_caches`, root only: without root they are left
out and said to be); warm runs follow an unmeasured load of each engine, which also compiles
Hearth's kernels once. Engines alternate within each round so that neither always runs on a
machine the other has just warmed.

    python -m benchmarks.hearth_speed MODEL.gguf --worker-runs 2 [--pick-s 8] [--json OUT]

The load as the app makes it: a fresh engine worker (engine/runtime/worker.py) per run, timed
from its start to Ready, then, after `pick_s` seconds (the person picking a model), from the
Load command to ModelLoaded (the worker's own load and warm-up: prefill kernels, the decode
graph) and to the first token of a one-token reply (page cache warm; one unmeasured load
first). Cases: Hearth with the import warm-up (engine/runtime/hearth_prewarm.py) and the Load
sent at Ready (it waits for the warm-up) or after the pick; Hearth with HEARTH_PREWARM=0; and
llama.cpp in the same worker, with the warm-up (the worker does not know which engine comes;
"at Ready": while it runs) and without ("vs llama" divides by this one's first token). Each
row also gives the worker's GPU memory (NVML, per process) and resident memory just before the
Load: a warm-up that made a CUDA context would show in the first, torch's libraries in the second.
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
PICK_S = 8.0  # seconds between Ready and Load: a person choosing a model
# (label, engine, extra environment, seconds between Ready and Load; None: PICK_S)
WORKER_CASES = (
    ("hearth prewarm, load at Ready", "hearth", {}, 0.0),
    ("hearth prewarm, load after pick", "hearth", {}, None),
    ("hearth HEARTH_PREWARM=0", "hearth", {"HEARTH_PREWARM": "0"}, None),
    ("llama.cpp", "llama", {}, None),
    ("llama.cpp, load at Ready", "llama", {}, 0.0),
    ("llama.cpp HEARTH_PREWARM=0", "llama", {"HEARTH_PREWARM": "0"}, None),
)
WORKER_LINES = ("imported ahead", "not imported ahead", "waited", "compiling its GPU kernels")


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
    phases = [r for r in loads.get("warm", {}).get("hearth", []) if "token_s" in r]
    if phases:
        last = phases[-1]
        lines.append(
            f"Hearth's warm load in parts (last run): CUDA context and weights "
            f"{last['load_s']:.2f} s, cache and first token {last['token_s']:.2f} s "
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
        info = read_model_info(model)
        # in the app's order (engine/runtime/hearth_load.py): the CUDA context is made inside
        # the load, by its first allocation on the GPU, while the disk reads what the
        # uploader's plan advised at its start (engine/hearth/upload.py)
        ops = select_ops("cuda")
        loaded = Transformer.load(model_config(info), GGUFTensors(model, info), ops)
        torch.cuda.synchronize()
        weights = time.perf_counter()
        cache = new_cache(loaded, "paged-f16", N_CTX)
        one = torch.tensor([1], device="cuda")
        logits = loaded.forward(one, torch.zeros_like(one), cache, n_keys=cache.n_ctx)
        int(torch.argmax(logits))
        done = time.perf_counter()
    return {
        "imports_s": imported - started,
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


def worker_load(model: str, engine: str, extra_env: dict, pick_s: float) -> dict:
    """One load in a fresh worker, as the app makes it (seconds; see the docstring)."""
    from engine.runtime import engine_output
    from engine.runtime import protocol as p
    from engine.runtime.client import EngineClient, EventQueue

    engine_output.TAIL_LINES_KEPT = 10_000  # the worker's every line, for its warm-up lines
    events = EventQueue()
    client = EngineClient(events, env={**os.environ, **extra_env})
    started = time.perf_counter()
    client.start()
    try:
        ready = events.wait_for(p.Ready, timeout=300)
        if not isinstance(ready, p.Ready):
            return {"error": f"no Ready: {ready}"}
        readied = time.perf_counter()
        time.sleep(pick_s)  # the person picking a model
        gpu_mib = worker_gpu_mib(client.pid)
        rss_mib = worker_rss_mib(client.pid)
        asked = time.perf_counter()
        client.load(p.ModelParams(path=model, engine=engine, n_ctx=N_CTX))
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=600)
        if not isinstance(loaded, p.ModelLoaded):
            return {"error": f"load: {loaded}"}
        got = time.perf_counter()
        client.generate(prompt="Hello", sampling=p.SamplingParams(temperature=0.0), max_tokens=1)
        done = events.wait_for(p.GenerationDone, p.GenerationFailed, timeout=600)
        if not isinstance(done, p.GenerationDone):
            return {"error": f"generate: {done}"}
        first = time.perf_counter()
        lines = [x for x in client.last_lines() if any(w in x for w in WORKER_LINES)]
    finally:
        client.close()
    return {
        "engine": loaded.engine,
        "ready_s": readied - started,
        "gpu_mib_before_load": gpu_mib,
        "rss_mib_before_load": rss_mib,
        "load_s": got - asked,
        "worker_load_s": loaded.load_seconds,
        "first_token_s": first - asked,
        "lines": lines,
    }


def worker_rss_mib(pid: int | None) -> float | None:
    """The process's resident memory (MiB; Linux), None: unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None
    return kib / 1024


def worker_gpu_mib(pid: int | None) -> float | None:
    """The process's GPU memory by NVML (MiB, all GPUs; 0: it holds none), None: unknown."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        used = 0
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == pid:
                    used += proc.usedGpuMemory or 0
        return used / 2**20
    finally:
        pynvml.nvmlShutdown()


def measure_worker_loads(model: str, runs: int, pick_s: float = PICK_S) -> dict:
    """{"first": the unmeasured load, "cases": {label: [worker_load results]}}; cases
    alternate within each round."""
    out: dict = {"runs": runs, "pick_s": pick_s, "cases": {c[0]: [] for c in WORKER_CASES}}
    out["first"] = worker_load(model, "hearth", {}, 0.0)  # compiles kernels not yet cached
    for i in range(runs):
        cases = WORKER_CASES if i % 2 == 0 else WORKER_CASES[::-1]
        for label, engine, extra, pause in cases:
            result = worker_load(model, engine, extra, pick_s if pause is None else pause)
            out["cases"][label].append(result)
    return out


def report_worker_loads(loads: dict) -> str:
    first = loads["first"]
    lines = [
        f"the load in a fresh worker, page cache warm (s, medians of {loads['runs']}; "
        f"Load sent {loads['pick_s']:g} s after Ready unless 'at Ready')",
        f"{'case':<34} {'Ready':>6} {'GPU MiB':>8} {'RSS MiB':>8} {'load':>6} {'first tok':>9} "
        f"{'vs llama':>8}",
        f"unmeasured first load: {json.dumps(first)}",
    ]
    rows = loads["cases"]
    llama = [
        r["first_token_s"]
        for r in rows.get("llama.cpp HEARTH_PREWARM=0", [])
        if "first_token_s" in r
    ]
    reference = statistics.median(llama) if llama else None
    for label, results in rows.items():
        good = [r for r in results if "error" not in r]
        lines += [f"{label}: {r['error']}" for r in results if "error" in r]
        if not good:
            continue
        med = {
            k: statistics.median(r[k] for r in good) for k in ("ready_s", "load_s", "first_token_s")
        }
        mib, rss = good[-1]["gpu_mib_before_load"], good[-1]["rss_mib_before_load"]
        ratio = f"{med['first_token_s'] / reference:7.2f}x" if reference else "      -"
        lines.append(
            f"{label:<34} {med['ready_s']:6.2f} {'?' if mib is None else f'{mib:.0f}':>8} "
            f"{'?' if rss is None else f'{rss:.0f}':>8} "
            f"{med['load_s']:6.2f} {med['first_token_s']:9.2f} {ratio:>8}"
        )
        lines += [f"    {x}" for x in good[-1]["lines"]]
    return "\n".join(lines)


if __name__ == "__main__":
    engine, path = sys.argv[1], sys.argv[2]
    result = hearth_child(path) if engine == "hearth" else llama_child(path)
    print(json.dumps(result))
