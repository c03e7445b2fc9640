"""One layer's decode attention in a cache of a fixed capacity at several depths: what of its time
is fixed (present at depth 64, where one page is read) and what grows with the pages read, at
Llama-3-8B's (8 KV heads) or Qwen3-30B-A3B's (4) shape; and launch variants beside main.

    python3 2026-12-01-s39-attention-depth.py --kv-heads 4 --capacity 32832 \
        --depths 64 8192 32768 --variants main chunk256 per_sm=3

Variants: main; chunk256 (the reduce merging up to 256 splits a step at 8 warps, so that 132
splits are one step); FIELD=VALUE[,FIELD=VALUE] of AttentionTuning (per_sm, stages, warps,
reduce_warps, overlap: the reduce launched as the split's dependent) or dc
(decode_launch.REDUCE_D_CHUNK, where the reduce splits a head's D values).
Run with PYTHONPATH naming a copy of another tree's kernels/ first to time that tree's.
Times: CUDA-graph replays of the layer's attention over layers that defeat the L2 (median
us a layer), and the profiler's median of each kernel (split, reduce: a dependent launch's
duration includes its wait). --ncu: only run the attention 12 times at the last depth (for
Nsight Compute's kernel filter)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics

import torch

import kernels.decode_launch as decode_launch
from benchmarks.kernels.timing import L2_DEFEAT_BYTES, captured_graph, time_calls
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec

FIELDS = {"warps": "num_warps", "stages": "num_stages", "per_sm": "programs_per_sm",
          "reduce_warps": "reduce_warps", "overlap": "overlap_reduce"}  # fmt: skip
CHUNK_MAIN = decode_launch.REDUCE_MAX_CHUNK
D_CHUNK_MAIN = getattr(decode_launch, "REDUCE_D_CHUNK", None)


def tuned(label: str, base):
    decode_launch.REDUCE_MAX_CHUNK = CHUNK_MAIN
    if D_CHUNK_MAIN is not None:
        decode_launch.REDUCE_D_CHUNK = D_CHUNK_MAIN
    if label == "main":
        return base
    if label == "chunk256":
        decode_launch.REDUCE_MAX_CHUNK = 256
        return dataclasses.replace(base, reduce_warps=8)
    changes = {}
    for part in label.split(","):
        name, value = part.split("=")
        if name == "dc":  # a reduce program's share of a head's D values
            decode_launch.REDUCE_D_CHUNK = int(value)
        else:
            changes[FIELDS[name]] = int(value)
    return dataclasses.replace(base, **changes)


def cache_at(kv_heads: int, pair: str, capacity: int, depth: int):
    torch.cuda.empty_cache()
    k_format, v_format = pair.split("/")
    probe = KVCacheSpec(1, kv_heads, 128, k_format, v_format, max_tokens=capacity)
    layers = max(1, min(16, math.ceil(L2_DEFEAT_BYTES / (probe.bytes_per_token * depth))))
    spec = KVCacheSpec(layers, kv_heads, 128, k_format, v_format, max_tokens=capacity)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, depth)
    for layer in range(layers):
        for start in range(0, depth, 8192):
            n = min(8192, depth - start)
            k = torch.randn(n, kv_heads, 128, dtype=torch.float16, device="cuda")
            v = torch.randn(n, kv_heads, 128, dtype=torch.float16, device="cuda")
            cache.write(layer, seq, start, k, v)
    return cache, seq, layers


def kernel_times(run, replays: int = 20) -> dict[str, float]:
    from torch.profiler import ProfilerActivity, profile

    graph = captured_graph(run)
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    per: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type.name == "CUDA":
            per.setdefault(event.name.split("(")[0][:40], []).append(event.device_time)
    return {name: statistics.median(times) for name, times in per.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--pair", default="kivi4/rot4")
    parser.add_argument("--capacity", type=int, default=32832)
    parser.add_argument("--depths", type=int, nargs="*", default=[64, 8192, 32768])
    parser.add_argument("--variants", nargs="*", default=["main"])
    parser.add_argument("--ncu", action="store_true")
    args = parser.parse_args()
    q = torch.randn(1, args.heads, 128, dtype=torch.float16, device="cuda")
    if args.ncu:
        cache, seq, _ = cache_at(args.kv_heads, args.pair, args.capacity, args.depths[-1])
        cache.tuning = tuned(args.variants[0], cache.tuning)
        for _ in range(12):
            cache.attend(0, q, [seq])
        torch.cuda.synchronize()
        return
    print(f"{args.pair}, {args.heads} heads over {args.kv_heads} KV heads, capacity "
          f"{args.capacity}")  # fmt: skip
    for depth in args.depths:
        cache, seq, layers = cache_at(args.kv_heads, args.pair, args.capacity, depth)
        base = cache.tuning
        for label in args.variants:
            cache.tuning = tuned(label, base)

            def run(cache=cache, seq=seq, layers=layers) -> None:
                for layer in range(layers):
                    cache.attend(layer, q, [seq])

            try:
                run()
                layer_us = time_calls(run, repeats=30) / layers * 1e6
                times = kernel_times(run)
            except Exception as error:
                print(f"  depth {depth} {label}: failed: {error!r}"[:300])
                continue
            fits = list(decode_launch._FITS.values())
            per_sm = cache.tuning.programs_per_sm or (fits[-1] if fits else 4)
            print(f"  depth {depth:6d} {label:16s} layer {layer_us:6.2f} us  split "
                  f"{times.get('decode_split_kernel', 0.0):6.2f}  reduce "
                  f"{times.get('decode_reduce_kernel', 0.0):6.2f}  fit/SM {per_sm}  splits "
                  f"{cache._split_count(1, 1, 0, per_sm)}  layers {layers}")  # fmt: skip
            decode_launch._FITS.clear()
    decode_launch.REDUCE_MAX_CHUNK = CHUNK_MAIN


if __name__ == "__main__":
    main()
