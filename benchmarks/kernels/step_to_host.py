"""kernels/step_to_host.write_to_host (a split's x, ids and weights written to pinned host
memory by one launch) against what it took the place of: three device-to-host copies (x as
it is, the ids, the weights; the host then converted x, which is not timed here). Each a CUDA
graph of 20 calls timed by events, per call, at the widths and picks of Qwen3-30B-A3B (2048,
8), gpt-oss-20b (2880, 4) and Mixtral (4096, 2), bf16 x.

    python -m benchmarks.kernels.step_to_host
"""

from __future__ import annotations

import torch

from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.step_to_host import write_to_host

CALLS = 20  # a graph's calls: the launch of the graph itself shared among them


def time_shape(n: int, k: int) -> None:
    x = torch.randn(1, n, device="cuda").to(torch.bfloat16)
    ids = torch.randperm(128, device="cuda")[:k].view(1, k).to(torch.int32)
    weights = torch.rand(1, k, device="cuda")

    def pinned(width, dtype):
        return torch.zeros(1, width, dtype=dtype, pin_memory=True)

    x_host, ids_host, w_host = (
        pinned(n, torch.float32),
        pinned(k, torch.int32),
        pinned(k, torch.float32),
    )
    x_raw = pinned(n, torch.bfloat16)

    def written():
        for _ in range(CALLS):
            write_to_host(x, ids, weights, x_host, ids_host, w_host)

    def copied():
        for _ in range(CALLS):
            x_raw.copy_(x, non_blocking=True)
            ids_host.copy_(ids, non_blocking=True)
            w_host.copy_(weights, non_blocking=True)

    for name, fn in (("write_to_host", written), ("three copies", copied)):
        seconds = time_calls(fn, repeats=30) / CALLS
        print(f"width {n:5d} k {k} {name:<14} {seconds * 1e6:6.2f} us")


def main() -> int:
    if not cuda_banner():
        return 1
    for n, k in ((2048, 8), (2880, 4), (4096, 2)):
        time_shape(n, k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
