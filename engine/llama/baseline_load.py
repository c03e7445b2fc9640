"""llama.cpp's own load time for a file: model and context created through the C API alone.

llama-bench does not report load time, so the reference is the two C calls every llama.cpp
program makes (llama_model_load_from_file, llama_init_from_model) with the same parameters Hearth
uses, timed in a fresh process:

    python -m engine.llama.baseline_load MODEL --ctx N --gpu-layers N --flash-attn on
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def measure_in_child(
    model: str, *, n_ctx: int, gpu_layers: int, flash_attn: str, type_k: str, type_v: str
) -> float:
    cmd = [
        sys.executable, "-m", "engine.llama.baseline_load", model, "--ctx", str(n_ctx),
        "--gpu-layers", str(gpu_layers), "--flash-attn", flash_attn,
        "--type-k", type_k, "--type-v", type_v,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["load_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--flash-attn", default="on")
    parser.add_argument("--type-k", default="f16")
    parser.add_argument("--type-v", default="f16")
    args = parser.parse_args(argv)

    import llama_cpp.llama_cpp as C

    from engine.llama.driver import FLASH_ATTN, KV_TYPES

    C.llama_backend_init()
    mp = C.llama_model_default_params()
    mp.n_gpu_layers = args.gpu_layers if args.gpu_layers >= 0 else 2**31 - 1
    cp = C.llama_context_default_params()
    cp.n_ctx = args.ctx
    cp.flash_attn_type = FLASH_ATTN[args.flash_attn]
    cp.type_k, cp.type_v = KV_TYPES[args.type_k], KV_TYPES[args.type_v]
    started = time.perf_counter()
    model = C.llama_model_load_from_file(os.fsencode(args.model), mp)
    ctx = C.llama_init_from_model(model, cp) if model else None
    took = time.perf_counter() - started
    if not ctx:
        print("load failed", file=sys.stderr)
        return 1
    C.llama_free(ctx)
    C.llama_model_free(model)
    print(json.dumps({"load_s": took}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
