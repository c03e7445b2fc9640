"""One layer's decode attention at depth, at Llama-3-8B's (8 KV heads) or Qwen3-30B-A3B's (4 KV
heads) shape: the split count, the split kernel's registers and programs an SM, and each launch
shape's split and reduce times (torch.profiler over CUDA-graph replays, the L2 defeated by
spreading the cache over layers); --ncu only runs the attention 10 times, for a profiler.

    python3 2026-11-30-s30-attention-probe.py --kv-heads 4 --pair kivi4/rot4 --context 32768 \
        --tunings default warps=4 stages=3 per_sm=8
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

import torch

import benchmarks.kernels.attention as attention_bench
import kernels.decode_launch as decode_launch
from benchmarks.kernels.timing import captured_graph, time_calls

FIELDS = {"warps": "num_warps", "stages": "num_stages", "per_sm": "programs_per_sm",
          "reduce_warps": "reduce_warps", "mask_tail": "mask_tail", "chain": "chain_launches",
          "overlap": "overlap_reduce"}  # fmt: skip


def tuning_of(label: str, base):
    import kernels.kv_cache as kv_cache

    kv_cache.OPEN_APART = True
    if label == "default":
        return base
    changes = {}
    for part in label.split(","):
        name, value = part.split("=")
        # a module switch of call 3's tree (kernels.kv_cache.OPEN_APART: the kivi4 open page
        # shared with sealed pages when 0), since removed: setting it now changes nothing
        if name == "open_apart":
            kv_cache.OPEN_APART = bool(int(value))
            continue
        changes[FIELDS[name]] = int(value)
    return dataclasses.replace(base, **changes)


def kernel_times(run, replays: int = 20) -> dict[str, float]:
    """Median device microseconds a replay of each kernel name."""
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
            name = event.name.split("(")[0][:40]
            per.setdefault(name, []).append(event.device_time)
    return {name: statistics.median(times) for name, times in per.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--pair", default="kivi4/rot4")
    parser.add_argument("--context", type=int, default=32768)
    parser.add_argument("--tunings", nargs="*", default=["default"])
    parser.add_argument("--page-size", type=int, default=64)
    parser.add_argument("--ncu", action="store_true")
    args = parser.parse_args()
    attention_bench.KV_HEADS = args.kv_heads
    attention_bench.HEADS = args.heads
    k_format, v_format = args.pair.split("/")
    cache, seq, layers = attention_bench.filled_cache(
        k_format, v_format, args.context, args.page_size
    )
    q = torch.randn(1, args.heads, 128, dtype=torch.float16, device="cuda")
    base = cache.tuning
    if args.ncu:
        cache.tuning = tuning_of(args.tunings[0], base)
        for _ in range(10):
            cache.attend(0, q, [seq])
        torch.cuda.synchronize()
        return
    print(f"{args.pair} {args.kv_heads} KV heads, {args.context} positions, {layers} layers, "
          f"pages of {args.page_size}")  # fmt: skip
    for label in args.tunings:
        cache.tuning = tuning_of(label, base)

        def run() -> None:
            for layer in range(layers):
                cache.attend(layer, q, [seq])

        try:
            run()
            layer_us = time_calls(run, repeats=30) / layers * 1e6
            times = kernel_times(run)
        except Exception as error:
            print(f"  {label}: failed: {error!r}"[:300])
            continue
        fits = list(decode_launch._FITS.values())
        split = times.get("decode_split_kernel", 0.0)  # a launch's median: one layer
        reduce = times.get("decode_reduce_kernel", 0.0)
        n_splits = cache._split_count(1, 1, 0, cache.tuning.programs_per_sm or fits[-1])
        print(f"  {label:24s} layer {layer_us:6.2f} us  split {split:6.2f} us  "
              f"reduce {reduce:5.2f} us  "
              f"fit/SM {fits[-1] if fits else '?'}  splits {n_splits}")  # fmt: skip
        decode_launch._FITS.clear()


if __name__ == "__main__":
    main()
