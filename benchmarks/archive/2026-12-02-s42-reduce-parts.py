"""The decode reduce (kernels/decode_attention.py's decode_reduce_kernel) alone over N parts a
query row, as the engine launches it plainly: what merging a part a warp of the Gluon probe
(2026-12-02-s42-gluon-split.py --warp-parts) would cost beside the engine's 132 splits.

    python3 2026-12-02-s42-reduce-parts.py --parts 132 264 528

Qwen3-30B-A3B's 32 query heads of 128, one token; the partials stay in the L2 between
replays, as they do after the split kernel that writes them."""

from __future__ import annotations

import argparse

import torch
import triton

from benchmarks.kernels.timing import kernel_durations
from kernels.decode_attention import decode_reduce_kernel
from kernels.decode_launch import REDUCE_D_CHUNK, REDUCE_MAX_CHUNK, reduce_warps_for


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--parts", type=int, nargs="*", default=[132, 264, 528])
    args = parser.parse_args()
    d = 128
    for n in args.parts:
        rows = args.heads * n
        acc = torch.randn(rows, d, device="cuda")
        m = torch.randn(rows, device="cuda")
        total = torch.rand(rows, device="cuda") + 1.0
        out = torch.empty(1, 1, args.heads, d, dtype=torch.float16, device="cuda")
        chunk = min(REDUCE_MAX_CHUNK, triton.next_power_of_2(n))

        def run(acc=acc, m=m, total=total, out=out, n=n, chunk=chunk) -> None:
            decode_reduce_kernel[(1, args.heads, d // REDUCE_D_CHUNK)](
                acc, m, total, out, m, m, m, m, n, HQ=args.heads, D=d, DC=REDUCE_D_CHUNK,
                CHUNK=chunk, num_warps=reduce_warps_for(chunk, REDUCE_D_CHUNK),
            )  # fmt: skip

        print(f"{n} parts a row: reduce {kernel_us(run):.2f} us (a step of {chunk})")


def kernel_us(run, launches: int = 16) -> float:
    """The profiler's median duration of the reduce, launched 16 times a graph replay."""

    def many() -> None:
        for _ in range(launches):
            run()

    return kernel_durations(many)["decode_reduce_kernel"]


if __name__ == "__main__":
    main()
