"""kernels/expert_unpack.unpack_slots (staged experts laid out tensor by tensor for the expert
GEMV) against its torch reference (a strided copy a tensor), at a Qwen3-30B-A3B expert's
twelve planes (gate and up Q4_K 768 x 2048, down Q6_K 2048 x 768) for 4, 5 and 6 slots (a
split's 8 - c picks), each a CUDA graph replay timed by events; bandwidth as bytes read and
written against the device-to-device copy rate.

    python -m benchmarks.kernels.expert_unpack [--splits 8,32]   # programs a slot's tensor
"""

from __future__ import annotations

import argparse
import functools

import torch

from benchmarks.kernels.timing import copy_bandwidth, cuda_banner, time_calls
from kernels.expert_unpack import SPLITS, UnpackTable, unpack_slots, unpack_slots_torch

GATE = (12288, 12288, 73728, 786432)  # d, dmin, scales, qs of a Q4_K 768 x 2048 expert
SIZES = (*GATE, *GATE, 786432, 393216, 98304, 12288)  # down: ql, qh, scales, d of Q6_K


def _layout(n_slots: int):
    src, dst, at, out = [], [], 0, 0
    for size in SIZES:
        src.append(at)
        dst.append(out)
        at += size
        out += -(-n_slots * size // 256) * 256
    return src, dst, at, out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--splits", default=str(SPLITS), help="programs a slot's tensor, e.g. 8,32")
    args = parser.parse_args()
    splits = [int(n) for n in args.splits.split(",")]
    if not cuda_banner():
        return 1
    rate = copy_bandwidth()
    print(f"copy rate {rate / 1e9:.0f} GB/s (read + written)")
    for n_slots in (4, 5, 6):
        src, dst, row, total = _layout(n_slots)
        table = UnpackTable.of(SIZES, src, dst, "cuda")
        staged = torch.randint(0, 255, (n_slots, row), dtype=torch.uint8, device="cuda")
        planes = torch.zeros(total, dtype=torch.uint8, device="cuda")
        moved = 2 * n_slots * row
        args = (staged, planes, table, n_slots)
        calls = [(f"unpack_slots/{n}", functools.partial(unpack_slots, *args, n)) for n in splits]
        calls.append(("torch copies", functools.partial(unpack_slots_torch, *args)))
        for name, fn in calls:
            seconds = time_calls(fn, repeats=50)
            share = moved / seconds / rate
            print(f"{n_slots} slots ({n_slots * row / 2**20:.1f} MiB) {name:<13} "
                  f"{seconds * 1e6:6.1f} us  {share:6.1%} of the copy rate")  # fmt: skip
        expected = torch.zeros_like(planes)
        unpack_slots_torch(staged, expected, table, n_slots)
        for n in splits:
            planes.zero_()
            unpack_slots(staged, planes, table, n_slots, n)
            assert torch.equal(planes, expected), f"unpack_slots/{n} differs from torch copies"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
