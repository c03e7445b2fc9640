"""Where a Hearth prefill chunk's time goes on the GPU: run-to-run spread, GPU-busy time against
wall time (is the host the bottleneck?), and the kernels that take the device time.

    python -m benchmarks.prefill_profile MODEL.gguf [--tokens 512] [--runs 12] [--both]
        [--also-env K=V]

Prints, for a chunk of `--tokens` random ids into an empty f16 cache (as hearth_speed's pp512):
each run's wall time; the same with CUDA events (device time from the first launch to the
last); the host's own launching time with the GPU held busy; then one run under
torch.profiler, the kernels sorted by device time, the copies by shape, and the host-side
operators sorted by their own CPU time. --also-env NAME=VALUE: then the timed runs and the
profiled run again with that environment variable set, in the same process (one load: a
kernel variant that reads the variable at launch measured against the default), with the chunks
launched eagerly (a captured graph would replay the kernels it was captured with).

Chunks run as the worker runs them: replayed from CUDA graphs (engine/hearth/prefill_graph.py;
every step below first runs its chunk twice, eagerly then captured, unmeasured), or eagerly
with HEARTH_PREFILL_GRAPH=0. `--both`: the timed runs and the host's time eagerly, then from
the graphs, in one process (old against new on the same load); the profiles then follow
HEARTH_PREFILL_GRAPH.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

from benchmarks.hearth_speed import DEVICE, chunk_forward, new_cache, sync
from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.ops import select_ops
from engine.hearth.weights import GGUFTensors


def warm_chunk(model: Transformer, n_tokens: int, graphs: bool | None = None):
    """chunk(ids): the logits of an n_tokens chunk at position 0 into its own empty f16
    cache, as the worker runs it, after two unmeasured chunks (the eager one that compiles,
    the captured one)."""
    cache = new_cache(model, "f16", n_tokens + 16)
    forward = chunk_forward(model, cache, graphs)

    def chunk(ids: torch.Tensor) -> torch.Tensor:
        return forward(ids, 0)

    ids = torch.randint(0, model.config.n_vocab, (n_tokens,), device=DEVICE)
    for _ in range(2):
        chunk(ids)
    sync()
    graphs = getattr(forward, "__self__", None)  # the PrefillGraphs, where chunks replay
    for shape, why in getattr(graphs, "failures", {}).items():
        print(f"the chunk of {shape[0]} rows over {shape[1]} slots runs eagerly: {why}")
    for shape, why in getattr(graphs, "attention_backends", {}).items():
        print(f"the chunk of {shape[0]} rows over {shape[1]} slots captured with {why}")
    return chunk


def timed_runs(model: Transformer, n_tokens: int, runs: int, graphs: bool | None = None) -> None:
    chunk = warm_chunk(model, n_tokens, graphs)
    rng = np.random.default_rng(1)
    walls, devices = [], []
    for _ in range(runs):
        ids = torch.tensor(rng.integers(0, model.config.n_vocab, n_tokens), device=DEVICE)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync()
        began = time.perf_counter()
        start.record()
        chunk(ids)
        end.record()
        launched = time.perf_counter()
        sync()
        walls.append((time.perf_counter() - began, launched - began))
        devices.append(start.elapsed_time(end) / 1e3)
    for i, ((wall, host), dev) in enumerate(zip(walls, devices, strict=True)):
        print(
            f"run {i:2d}: wall {wall * 1e3:7.1f} ms ({n_tokens / wall:7.0f} tok/s), host launching "
            f"{host * 1e3:7.1f} ms, device {dev * 1e3:7.1f} ms"
        )
    median = statistics.median(w for w, _ in walls[2:])
    print(
        f"median wall after 2 more warm runs: {median * 1e3:.1f} ms = {n_tokens / median:.0f} tok/s"
    )
    # the graphs' pool included (this chunk's graph is alive here)
    print(f"GPU memory reserved by torch: {torch.cuda.memory_reserved() / 2**20:.0f} MiB")


def host_cost(model: Transformer, n_tokens: int, runs: int = 4, graphs: bool | None = None):
    """The host's own time to launch one chunk: the GPU is held by a sleeping kernel first,
    so no launch waits for it (up to the launch queue's depth, about a thousand)."""
    chunk = warm_chunk(model, n_tokens, graphs)
    ids = torch.randint(0, model.config.n_vocab, (n_tokens,), device=DEVICE)
    times = []
    for _ in range(runs):
        sync()
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU clock cycles
        began = time.perf_counter()
        chunk(ids)
        times.append(time.perf_counter() - began)
        sync()
    print("host time to launch a chunk: " + ", ".join(f"{t * 1e3:.1f} ms" for t in times))


def python_profile(model: Transformer, n_tokens: int) -> None:
    """The host's Python functions by their own time over three chunks (cProfile; the GPU
    held busy as in host_cost, so no function's time is a wait for the device)."""
    import cProfile
    import pstats

    chunk = warm_chunk(model, n_tokens)
    ids = torch.randint(0, model.config.n_vocab, (n_tokens,), device=DEVICE)
    profiler = cProfile.Profile()
    for _ in range(3):
        sync()
        torch.cuda._sleep(2_000_000_000)
        profiler.enable()
        chunk(ids)
        profiler.disable()
        sync()
    print("\nPython functions by own time, three chunks (cProfile):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def profiled_run(model: Transformer, n_tokens: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    chunk = warm_chunk(model, n_tokens)
    ids = torch.randint(0, model.config.n_vocab, (n_tokens,), device=DEVICE)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True
    ) as prof:
        chunk(ids)
        sync()
    averages = prof.key_averages()

    def device_us(e) -> float:
        return getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)

    kernels = sorted((e for e in averages if device_us(e) > 0), key=lambda e: -device_us(e))
    total = sum(device_us(e) for e in kernels)
    print(f"\nkernels by device time (total {total / 1e3:.1f} ms):")
    for e in kernels[:25]:
        print(f"  {device_us(e) / 1e3:8.2f} ms  {e.count:5d} calls  {e.key[:100]}")
    copies = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::copy_"]
    print("\naten::copy_ by input shapes (device time of what it launched):")
    for e in sorted(copies, key=lambda e: -getattr(e, "device_time_total", 0))[:10]:
        print(f"  {e.device_time_total / 1e3:8.2f} ms  {e.count:5d} calls  {e.input_shapes}")
    host = sorted(averages, key=lambda e: -e.self_cpu_time_total)
    print("\nhost operators by own CPU time:")
    for e in host[:25]:
        print(f"  {e.self_cpu_time_total / 1e3:8.2f} ms  {e.count:5d} calls  {e.key[:100]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--both", action="store_true", help="eager chunks, then graphs")
    parser.add_argument("--also-env", help="NAME=VALUE: the runs again with it set (eagerly)")
    args = parser.parse_args(argv)
    info = read_model_info(args.model)
    model = Transformer.load(model_config(info), GGUFTensors(args.model, info), select_ops(DEVICE))
    sync()
    for graphs in (False, True) if args.both else (None,):
        if graphs is not None:
            print(f"\n== chunks {'replayed from CUDA graphs' if graphs else 'launched eagerly'}")
        timed_runs(model, args.tokens, args.runs, graphs)
        host_cost(model, args.tokens, graphs=graphs)
    python_profile(model, args.tokens)
    profiled_run(model, args.tokens)
    if args.also_env:
        name, _, value = args.also_env.partition("=")
        os.environ[name] = value
        print(f"\nagain with {name}={value} (chunks launched eagerly):")
        timed_runs(model, args.tokens, args.runs, False)
        profiled_run(model, args.tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
