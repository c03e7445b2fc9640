"""Where one decode attention step's time goes, on a GPU:

    python -m benchmarks.kernels.attention_anatomy [--pairs f16/f16,rot4/rot4]
        [--contexts 4096,32768] [--tuning FIELD=VALUE ...] [--json PATH]

Per K/V pair and context, over the same cache (as many layers as defeat the L2, one graph of
every layer's step, as benchmarks/kernels/attention.py times them), µs a layer:
  step          the split kernel and its reduce, as the cache launches them
  split only    the reduce's launch left out
  reduce only   the split kernel's launch left out (the reduce reads stale partials)
  one page      the same step with the sequence's length set to 64 positions: every launch and
                fixed cost, one page of reading
and from a profile of the step's graph (torch.profiler's CUDA kernel records): each kernel's
own time and the gap from the end of one kernel to the start of the next. Then, for each split
kernel compiled, the programs an SM holds as kernels/occupancy.py counts them beside CUDA's
own occupancy query (cuOccupancyMaxActiveBlocksPerMultiprocessor): the splits are sized from
the first, so where they differ a launch takes two waves.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import statistics
from contextlib import contextmanager

import torch

from benchmarks.kernels.attention import filled_cache
from benchmarks.kernels.cases import HEAD_DIM, HEADS
from benchmarks.kernels.timing import captured_graph, time_calls
from kernels import decode_launch
from kernels.decode_attention import decode_split_kernel
from kernels.occupancy import programs_per_sm, sm_limits


class _Skipped:
    """Stands in for a Triton kernel whose launches are left out."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


@contextmanager
def _without(name: str):
    """decode_launch launching no `name` kernel for the duration."""
    kept = getattr(decode_launch, name)
    setattr(decode_launch, name, _Skipped())
    try:
        yield
    finally:
        setattr(decode_launch, name, kept)


def kernel_profile(fn, replays: int = 5) -> dict:
    """Each kernel's mean time (µs) and the mean gap (µs) from one kernel's end to the next
    one's start, by (kernel, next kernel), over `replays` replays of fn's graph."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    fn()
    torch.cuda.synchronize()
    graph = captured_graph(fn)
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted(
        (e.time_range.start, e.time_range.end, e.name)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower()
    )
    own: dict[str, list[float]] = {}
    gaps: dict[str, list[float]] = {}
    for (start, end, name), after in zip(kernels, [*kernels[1:], None], strict=True):
        short = name.split("(")[0][:40]
        own.setdefault(short, []).append(end - start)
        if after is not None:
            gaps.setdefault(f"{short} -> {after[2].split('(')[0][:40]}", []).append(after[0] - end)
    return {
        "kernel_us": {k: statistics.mean(v) for k, v in own.items()},
        "gap_us": {k: statistics.mean(v) for k, v in gaps.items()},
        "count": {k: len(v) for k, v in own.items()},
    }


def driver_occupancy() -> list[dict]:
    """For each split kernel compiled so far: registers, shared memory, warps, the programs an
    SM holds by kernels/occupancy.py and by CUDA's occupancy query."""
    cuda = ctypes.CDLL("libcuda.so.1")
    limits = sm_limits(torch.device("cuda"))
    rows = []
    for caches in decode_split_kernel.device_caches.values():
        for kernel in caches[0].values():
            kernel._init_handles()
            warps, shared = kernel.metadata.num_warps, kernel.metadata.shared
            blocks = ctypes.c_int(0)
            status = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), ctypes.c_void_p(kernel.function), warps * 32, shared
            )
            rows.append({
                "regs": kernel.n_regs, "warps": warps, "shared": shared,
                "ours": programs_per_sm(kernel.n_regs, warps, shared, limits),
                "cuda": blocks.value if status == 0 else f"error {status}",
            })  # fmt: skip
    return rows


def anatomy(k_format: str, v_format: str, context: int, tuning) -> dict:
    """The figures of the module docstring for one pair and context."""
    cache, seq, layers = filled_cache(k_format, v_format, context)
    cache.tuning = tuning
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")

    def step() -> None:
        for layer in range(layers):
            cache.attend(layer, q, [seq])

    figures = {"k": k_format, "v": v_format, "context": context, "layers": layers}
    figures["step_us"] = time_calls(step) / layers * 1e6
    with _without("decode_reduce_kernel"):
        figures["split_only_us"] = time_calls(step) / layers * 1e6
    with _without("decode_split_kernel"):
        figures["reduce_only_us"] = time_calls(step) / layers * 1e6
    figures["profile"] = kernel_profile(step)
    # the same launches over 64 of the positions: the sequence's length on the device is all
    # the kernels read of it (the split count stays the capacity's)
    length = cache._length_tensors[seq]
    kept = length.clone()
    length.fill_(64)
    figures["one_page_us"] = time_calls(step) / layers * 1e6
    length.copy_(kept)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels.attention_anatomy")
    parser.add_argument("--pairs", default="f16/f16,rot4/rot4")
    parser.add_argument("--contexts", default="4096,32768")
    parser.add_argument("--tuning", nargs="*", default=[], help="AttentionTuning FIELD=VALUE")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    changes = {name: int(value) for name, value in (t.split("=") for t in args.tuning)}
    tuning = dataclasses.replace(decode_launch.AttentionTuning(), **changes)
    rows = []
    for pair in args.pairs.split(","):
        k_format, v_format = pair.split("/")
        for context in (int(c) for c in args.contexts.split(",")):
            row = anatomy(k_format, v_format, context, tuning)
            rows.append(row)
            print(
                f"{pair:10} {context:>7}: step {row['step_us']:6.1f} us, split only "
                f"{row['split_only_us']:6.1f}, reduce only {row['reduce_only_us']:5.1f}, one page "
                f"{row['one_page_us']:5.1f}",
                flush=True,
            )
            for name, us in row["profile"]["kernel_us"].items():
                print(f"    kernel {name:40} {us:7.2f} us  x{row['profile']['count'][name]}")
            for name, us in row["profile"]["gap_us"].items():
                print(f"    gap    {name:70} {us:6.2f} us")
    occupancy = driver_occupancy()
    for row in occupancy:
        print(
            f"split kernel: {row['regs']} registers, {row['warps']} warps, {row['shared']} B "
            f"shared: programs an SM {row['ours']} (kernels/occupancy.py), {row['cuda']} (CUDA)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "occupancy": occupancy}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
