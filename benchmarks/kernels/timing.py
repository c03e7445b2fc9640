"""Timing helpers: copy bandwidth, and CUDA-graph replays timed with events (median)."""

from __future__ import annotations

import statistics
import sys

import torch

L2_DEFEAT_BYTES = 400 * 2**20  # data spread over this much, so repeats come from HBM


def copy_bandwidth(n_bytes: int = 2 * 2**30, repeats: int = 20) -> float:
    """Bytes per second of a device-to-device copy, counting bytes read and written."""
    src = torch.randint(0, 255, (n_bytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    seconds = time_calls(lambda: dst.copy_(src), repeats=repeats, graph=False)
    return 2 * n_bytes / seconds


def time_calls(fn, repeats: int = 20, graph: bool = True) -> float:
    """Median seconds of one fn() (fn itself may do many launches), after warm-up."""
    fn()
    fn()
    torch.cuda.synchronize()
    run = fn
    if graph:
        run = captured_graph(fn).replay
        run()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def captured_graph(fn) -> torch.cuda.CUDAGraph:
    """fn captured in a CUDA graph, after a warm-up call on a side stream (its compiles and
    allocations outside the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    captured = torch.cuda.CUDAGraph()
    with torch.cuda.graph(captured):
        fn()
    return captured


def kernel_durations(fn, replays: int = 20) -> dict[str, float]:
    """Median device microseconds of each kernel fn launches, by kernel name: fn captured in a
    CUDA graph and replayed under the profiler (a dependent launch's duration includes its
    wait for the launch before it)."""
    from torch.profiler import ProfilerActivity, profile

    graph = captured_graph(fn)
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type.name == "CUDA":
            times.setdefault(event.name.split("(")[0], []).append(event.device_time)
    return {name: statistics.median(values) for name, values in times.items()}


def cuda_banner() -> bool:
    """Print the line a GPU benchmark's output starts with (the device, torch and triton), or,
    without a CUDA device, say so on stderr and return False."""
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark times GPU kernels", file=sys.stderr)
        return False
    import triton

    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, "
          f"triton {triton.__version__}")  # fmt: skip
    return True
