"""Q8_0 GEMVs at gpt-oss-20b's Q8_0 matrices, one input row: the float path
(gemv_blocks.block32_kernel) over a few tile shapes, then the integer GEMV over its own.

    python -m benchmarks.kernels.gemv_q8_0

A gpt-oss decode step's 49 block32 launches took 785 us (docs/measurements/
2026-11-29-s16-call-1/gpt-oss.txt): its joined Q+K+V (5120 x 2880) and output projection
(2880 x 4096) a layer and the output matrix (201088 x 2880), 1.29 GB in all, ~40% of the copy
rate. Each line: the tile (rows a program, 32-blocks a step, warps, stages), the time of one
call (matrices spread past the L2) and its fraction of the copy rate; the first line of each
shape is float_config's tile. Then the integer GEMV (kernels/gemv_q8_0.py, x in 8 bits as the
RMSNorm before it writes it) in each of INTEGER_TILES, checked against the float path within
8-bit x's error (docs/decisions/2026-11-29-q8_0-integer-gemv.md: the integer GEMV won, in the
2 x 64 x 2 tile).
"""

from __future__ import annotations

import dataclasses

import torch

from benchmarks.kernels.gemv import _copies
from benchmarks.kernels.timing import copy_bandwidth, cuda_banner, time_calls
from kernels.act_quant import quantize_activation
from kernels.gemv import Q8_0_INTEGER, float_config, quant_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes

SHAPES = [("attn_qkv", 5120, 2880), ("attn_output", 2880, 4096), ("output", 201088, 2880)]
# (rows a program, 32-blocks a step, warps, stages)
TILES = [(4, 16, 4, 2), (2, 16, 2, 2), (4, 8, 2, 3), (8, 8, 4, 3), (16, 8, 4, 2), (4, 32, 4, 2),
         (2, 32, 4, 2), (1, 32, 1, 2), (8, 16, 8, 2)]  # fmt: skip
# the integer GEMV's (rows a program, 32-blocks a step, warps); Q8_0_INTEGER's is (2, 64, 2)
INTEGER_TILES = [(4, 64, 4), (4, 128, 4), (4, 32, 2), (8, 64, 4), (2, 64, 2), (8, 32, 4)]


def _per_call(x: torch.Tensor, weights: list[PackedWeight], cfg, xq=None) -> float:
    """Seconds a call: a graph replay of one call a copy of the matrix, over the copies (xq:
    x in 8 bits, given as the norm before the matrix gives it)."""

    def run() -> None:
        for weight in weights:
            quant_matmul(x, weight, cfg, quantized=xq)

    return time_calls(run, repeats=20) / len(weights)


def main() -> int:
    if not cuda_banner():
        return 1
    copy_bw = copy_bandwidth()
    for name, n_out, n_in in SHAPES:
        w = PackedWeight.from_gguf(random_weight_bytes("Q8_0", n_out, n_in), "Q8_0",
                                   (n_out, n_in), device="cuda")  # fmt: skip
        weights = _copies(w) if w.nbytes < 2**28 else [w]
        x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")
        base = float_config("Q8_0", 1)
        tiles = [(base.block_n, base.blocks_per_tile, base.num_warps, base.num_stages), *TILES]
        want = quant_matmul(x, w).float()
        for block_n, blocks, warps, stages in dict.fromkeys(tiles):
            cfg = dataclasses.replace(base, block_n=block_n, blocks_per_tile=blocks,
                                      num_warps=warps, num_stages=stages)  # fmt: skip
            got = quant_matmul(x, w, cfg).float()
            close = torch.allclose(got, want, rtol=1e-2, atol=1e-2)
            us = _per_call(x, weights, cfg) * 1e6
            frac = w.nbytes / (us * 1e-6) / copy_bw
            print(f"{name:12} {n_out:6} x {n_in}: {block_n:2} rows x {blocks:2} blocks, "
                  f"{warps} warps, {stages} stages: {us:8.2f} us  {frac:5.1%} of copy"
                  f"{'' if close else '  WRONG'}", flush=True)  # fmt: skip
        xq = quantize_activation(x)
        for block_n, blocks, warps in INTEGER_TILES:
            cfg = dataclasses.replace(Q8_0_INTEGER, block_n=block_n, blocks_per_tile=blocks,
                                      num_warps=warps)  # fmt: skip
            got = quant_matmul(x, w, cfg, quantized=xq).float()
            error = float((got - want).norm() / want.norm())
            us = _per_call(x, weights, cfg, xq) * 1e6
            frac = w.nbytes / (us * 1e-6) / copy_bw
            print(f"{name:12} {n_out:6} x {n_in}: integer {block_n:2} rows x {blocks:3} blocks, "
                  f"{warps} warps: {us:8.2f} us  {frac:5.1%} of copy  (against the float path "
                  f"{error:.2%}){'' if error < 2e-2 else '  WRONG'}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
