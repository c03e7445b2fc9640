"""GPU memory for the planner's accuracy benchmark: what the device has in use (NVML, else
nvidia-smi), and a memory hog that leaves only a chosen amount free, as a smaller card would.

    python benchmarks/gpu_memory.py hog BYTES_TO_LEAVE   # "ready FREE"; holds until stdin closes
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys

MIB = 1024**2


def device_used(index: int = 0) -> int | None:
    """Bytes in use on GPU `index`, everything and everyone counted; None without an NVIDIA
    driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index))
        return int(info.used)
    except Exception:
        pass
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i",
         str(index)], capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return int(out) * MIB if out.isdigit() else None


class PeakSampler:
    """The device's used memory (NVML) sampled every `period_s` on a thread until stopped:
    `peak` is the largest reading, what the process's memory really reached (a buffer freed
    before the end no longer shows in a reading taken then). Without pynvml, `peak` stays None.

        with PeakSampler() as sampler:
            ...
        sampler.peak
    """

    def __init__(self, index: int = 0, period_s: float = 0.001):
        import threading

        self.peak: int | None = None
        self.samples = 0
        self._period = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(index,), daemon=True)

    def _run(self, index: int) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            return
        while True:
            used = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
            self.peak = used if self.peak is None else max(self.peak, used)
            self.samples += 1
            if self._stop.wait(self._period):
                return

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def hog(leave_bytes: int) -> None:
    """Hold GPU 0's memory with plain device allocations until only `leave_bytes` stay free;
    exit when stdin closes."""
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    remaining = free.value - leave_bytes
    held = []
    chunk = 256 * MIB
    while remaining > 0:
        size = min(chunk, remaining)
        ptr = ctypes.c_uint64()
        if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) != 0:
            if chunk <= 2 * MIB:
                break
            chunk //= 2
            continue
        held.append(ptr)
        remaining -= size
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    print(f"ready {free.value}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    if sys.argv[1:2] == ["hog"]:
        hog(int(sys.argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
