"""python -m benchmarks.kernels.attention_profile K/V CONTEXT [FLAG=VALUE ...]: one layer's
decode attention (Llama-3-8B's shape) over CONTEXT random positions, run 10 times, for a
profiler: ncu -k regex:decode_ --launch-skip 6 -c 2 python -m
benchmarks.kernels.attention_profile rot4/rot4 32768 num_warps=4 (the split kernel and its reduce;
AttentionTuning fields as FLAG=VALUE, integers or 0/1)."""

from __future__ import annotations

import dataclasses
import sys

import torch

from benchmarks.kernels.attention import filled_cache
from benchmarks.kernels.cases import HEAD_DIM, HEADS


def main(pair: str, context: int, *fields: str) -> None:
    k_format, v_format = pair.split("/")
    cache, seq, _ = filled_cache(k_format, v_format, context)
    changes = {name: int(value) for name, value in (f.split("=") for f in fields)}
    cache.tuning = dataclasses.replace(cache.tuning, **changes)
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    for _ in range(10):
        cache.attend(0, q, [seq])
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:])
