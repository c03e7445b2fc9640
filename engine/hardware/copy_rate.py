"""The memory bandwidth a device really reaches: one buffer copied into another, timed.

    measure_copy_rate("cuda")   -> GB/s on the GPU (torch, CUDA events), 0.0 if it cannot
    measure_copy_rate("cpu")    -> GB/s in host memory (numpy)

A copy reads and writes each byte once, so the rate is 2 x bytes / seconds: the figure the
kernels' benchmarks call the copy rate and the speed-of-light gauge divides by
(engine/hardware/speed_of_light.py). The best of a few repeats is taken: a copy cannot run
faster than the memory allows, only slower when something else runs. It is measured once
after a load (tens of milliseconds); a failure gives 0.0, which leaves the gauge out.

On the GPU each timing spans GPU_COPIES copies back to back: one 128 MiB copy timed alone
reads 6-15% below the rate a long copy reaches (H200: 3,585-3,955 GB/s against 4,114-4,120
for 512 MiB and 1 GiB copies, 4,211 for the benchmarks' 2 GiB median; docs/measurements/
2026-11-30-s25-call-2/copy.txt), so the gauge's fractions read high; 256 MiB of buffers
stay within the plan's margin where a long copy's would not.
"""

from __future__ import annotations

import functools
import time

MIB = 1024 * 1024
GPU_BYTES = 128 * MIB  # past any GPU's L2 cache (H100: 50 MB); within the plan's margin
GPU_COPIES = 8  # copies a timing spans (module docstring)
CPU_BYTES = 64 * MIB  # past a desktop CPU's last-level cache, and quick on a busy machine
REPEATS = 3


@functools.cache  # once per device and process: the memory does not get faster
def measure_copy_rate(device: str) -> float:
    try:
        if device.startswith("cuda"):
            return _gpu_copy_rate(device)
        return _host_copy_rate()
    except Exception:  # a nicety: no figure rather than a failed load
        return 0.0


def _host_copy_rate(n_bytes: int = CPU_BYTES, repeats: int = REPEATS) -> float:
    import numpy as np

    src = np.ones(n_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch both pages first: the first copy would time page faults
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - began)
    return 2 * src.nbytes / best / 1e9


def _gpu_copy_rate(device: str, n_bytes: int = GPU_BYTES, repeats: int = REPEATS,
                   copies: int = GPU_COPIES) -> float:  # fmt: skip
    import torch

    if not torch.cuda.is_available():
        return 0.0
    src = torch.empty(n_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(copies):
            dst.copy_(src)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / copies)
    del src, dst
    torch.cuda.empty_cache()  # give the 256 MiB back: the plan did not count them
    return 2 * n_bytes / best / 1e9
