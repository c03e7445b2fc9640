"""The integer GEMV's tile (kernels/gemv.py's integer_config) at a model's dense matrices, one
input row, x in 8 bits as the engine gives it: which tile each shape would rather have.

    python -m benchmarks.kernels.gemv_tiles [--model qwen3-30b-a3b]

integer_config's tiles were chosen on Llama-3-8B's 4096-wide rows (docs/decisions/
0003-gemv-tile-shapes.md). Qwen3-30B-A3B's rows are 2048 wide (one step of 8 super-blocks) and
its 121 dense launches a decode step took 486 us of 2.09 ms on an H200 (docs/measurements/
2026-11-29-s19-call-1/qwen3.txt). Each line: the shape, the tile (what it changes from the
default), the time of one call (matrices spread past the L2), its fraction of the copy rate,
and whether its result is the default tile's within 1e-3 (the same 8-bit x; only the sums'
order differs).
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from benchmarks.kernels.gemv import _copies
from benchmarks.kernels.timing import copy_bandwidth, cuda_banner, time_calls
from kernels.act_quant import quantize_activation
from kernels.gemv import integer_config, quant_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes

# (name, format, rows, inputs) of a decode step's dense matrices in the random Q4_K_M files
MODELS = {
    "qwen3-30b-a3b": [
        ("attn_qkv", "Q4_K", 5120, 2048),
        ("attn_qk", "Q4_K", 4608, 2048),
        ("attn_v", "Q6_K", 512, 2048),
        ("attn_output", "Q4_K", 2048, 4096),
        ("output", "Q6_K", 151936, 2048),
    ],
}
# what each tile changes from integer_config's (rows a program, warps, stages, rows in a thread)
TILES = [
    {},
    {"block_n": 2},
    {"block_n": 8},
    {"num_warps": 4},
    {"block_n": 8, "num_warps": 4},
    {"block_n": 2, "num_warps": 1},
    {"num_stages": 2},
    {"early_next": False},
]


def _per_call(x, xq, weights, cfg) -> float:
    def run() -> None:
        for weight in weights:
            quant_matmul(x, weight, cfg, quantized=xq)

    return time_calls(run, repeats=20) / len(weights)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="qwen3-30b-a3b")
    args = parser.parse_args(argv)
    if not cuda_banner():
        return 1
    copy_bw = copy_bandwidth()
    for name, fmt, n_out, n_in in MODELS[args.model]:
        w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in),
                                   device="cuda")  # fmt: skip
        weights = _copies(w) if w.nbytes < 2**28 else [w]
        x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")
        xq = quantize_activation(x)
        base = integer_config(fmt)
        want = quant_matmul(x, w, base, quantized=xq).float()
        for change in TILES:
            cfg = dataclasses.replace(base, **change)
            if cfg.rows_in_thread and cfg.block_n < 4:
                cfg = dataclasses.replace(cfg, rows_in_thread=False)
            label = ", ".join(f"{k}={v}" for k, v in change.items()) or "default"
            try:
                got = quant_matmul(x, w, cfg, quantized=xq).float()
                us = _per_call(x, xq, weights, cfg) * 1e6
            except Exception as error:  # a tile this kernel does not take: say so, go on
                print(f"{name:12} {fmt} {n_out:6} x {n_in}: {label:32} failed: {error}")
                continue
            close = torch.allclose(got, want, rtol=1e-3, atol=1e-3 * float(want.abs().max()))
            frac = w.nbytes / (us * 1e-6) / copy_bw
            print(f"{name:12} {fmt} {n_out:6} x {n_in}: {label:32} {us:8.2f} us  {frac:5.1%} "
                  f"of copy{'' if close else '  DIFFERS'}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
