"""kernels/host_published.add_published (ggml's sum added on the GPU, read from pinned memory
once its flag is up) against what it took the place of: the sum copied to the device, then
added (a host-to-device copy and an add). Each a CUDA graph replay timed by events, at the
widths of Qwen3-30B-A3B (2048), gpt-oss-20b (2880) and Mixtral (4096), bf16.

The flag is left down and max_polls 0: the program reads it once, as it does when the host
has published before it runs, then reads the sum over the bus and adds it (what a pause
costs the GPU once ggml is done; the wait for ggml itself is the host's time).

    python -m benchmarks.kernels.host_published
"""

from __future__ import annotations

import torch

from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.host_published import add_published


def time_width(n: int) -> None:
    gpu_part = torch.randn(1, n, device="cuda").to(torch.bfloat16)
    host_sum = torch.randn(1, n).pin_memory()
    flag = torch.zeros(1, dtype=torch.int32).pin_memory()
    on_device = torch.empty(1, n, dtype=torch.bfloat16, device="cuda")

    def published():
        return add_published(gpu_part, host_sum, flag, max_polls=0)

    def copied_then_added():
        on_device.copy_(host_sum, non_blocking=True)
        return gpu_part + on_device

    for name, fn in (("add_published", published), ("copy, then add", copied_then_added)):
        seconds = time_calls(fn, repeats=50)
        print(f"width {n:5d} {name:<15} {seconds * 1e6:6.1f} us")


def main() -> int:
    if not cuda_banner():
        return 1
    for n in (2048, 2880, 4096):
        time_width(n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
