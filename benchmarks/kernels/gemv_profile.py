"""python -m benchmarks.kernels.gemv_profile FMT N_OUT N_IN: the 1-row GEMV of one weight, as
the engine launches it (default config, x given in 8 bits), run 10 times; for a profiler
(ncu -k regex:dp4a_gemv --launch-skip 5 -c 1 python -m benchmarks.kernels.gemv_profile Q4_K
14336 4096)."""

from __future__ import annotations

import sys

import torch

from kernels.act_quant import quantize_activation
from kernels.gemv import quant_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes


def main(fmt: str, n_out: int, n_in: int) -> None:
    w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
    x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")
    xq = quantize_activation(x)
    for _ in range(10):
        quant_matmul(x, w, quantized=xq)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
