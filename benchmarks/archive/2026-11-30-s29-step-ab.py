"""Variants of a decode step's launches A/B'd in one process, and where the step's time goes
inside its CUDA graph (a torch.profiler trace of graph replays: CUPTI's kernel timestamps, read
by 2026-11-30-s29-trace-layers.py).

    python3 benchmarks/archive/2026-11-30-s29-step-ab.py MODEL.gguf OUT_DIR --variants main ...

Variants (VARIANTS) are set up in turn in one process, each with a fresh cache and graph: tg128
tok/s and graph replay ms each round, and in the first round a trace of 4 replays.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from benchmarks.hearth_speed import DEVICE, decode_tokens, fill_randomly, new_cache, sync
from engine.gguf import read_model_info
from engine.hearth import attention_block
from engine.hearth.config import model_config
from engine.hearth.decode_graph import DecodeGraph
from engine.hearth.forward import Transformer
from engine.hearth.ops import select_ops
from engine.hearth.weights import GGUFTensors


def trace_replays(graph, depth: int, n: int, trace: str) -> None:
    """n graph replays under torch.profiler (CUPTI's kernel timestamps), as a Chrome trace:
    2026-11-30-s29-trace-layers.py reads it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(n):
            graph.step(1, depth + 5 + i, launch_ahead=False)
        sync()
    prof.export_chrome_trace(trace)


def _tuned(**fields):
    """A variant that sets the paged cache's AttentionTuning fields (kernels/decode_launch.py)."""

    def setup(cache) -> None:
        kernel_cache = cache.cache
        kernel_cache.tuning = dataclasses.replace(kernel_cache.tuning, **fields)

    return setup


def _write_apart(apart: bool):
    """A variant with a decode step's K/V row written by the KV write's own launch, not the
    attention's (attention_block.writes_in_attention off); measure_variant sets it back on
    (the engine's rule) first for every variant."""

    def setup(cache) -> None:
        attention_block.writes_in_attention = (
            (lambda layer, config: False) if apart else _WRITES_IN_ATTENTION
        )

    return setup


_WRITES_IN_ATTENTION = attention_block.writes_in_attention


# (variants since deleted, set by module switches: session 40's call 2 "swiglu-apart",
# "h-apart" and "apart", commit eb82c7e; call 2's "norm-dependent",
# "norm-gate-up-early" and "norm-both-early", commit ce56313; call 4's "seal-plain", commit
# 35e44b2; call 5's "no-wo-prefetch", commit 74f29fa; call 8's "swiglu-plain", commit e3cb0c1)
VARIANTS = {
    "main": lambda cache: None,
    # the attention's splits: programs an SM (its default: as many as fit)
    "per-sm-1": _tuned(programs_per_sm=1),
    "per-sm-2": _tuned(programs_per_sm=2),
    "per-sm-4": _tuned(programs_per_sm=4),
    "reduce-8-warps": _tuned(reduce_warps=8),
    "reduce-2-warps": _tuned(reduce_warps=2),
    "reduce-4-warps": _tuned(reduce_warps=4),
    # the split kernel's pipeline stages (its default: 5)
    "stages-4": _tuned(num_stages=4),
    "stages-6": _tuned(num_stages=6),
    # the split kernel's warps (kivi4/rot4's default: 2, FASTEST_WARPS)
    "write-apart": _write_apart(True),
    "split-4-warps": _tuned(num_warps=4),
    "split-4-warps-stages-3": _tuned(num_warps=4, num_stages=3),
}


def split_counts(cache) -> dict:
    """The split count the cache's attention takes at one sequence (as kv_cache.attend sizes
    it), for the record."""
    from kernels import kv_cache

    kernel_cache = cache.cache
    seen = {}
    count = kernel_cache._split_count

    def recording(n_seqs, n_tokens, window, per_sm=kv_cache.INTERPRETER_PROGRAMS_PER_SM):
        seen[(n_seqs, n_tokens, window, per_sm)] = count(n_seqs, n_tokens, window, per_sm)
        return seen[(n_seqs, n_tokens, window, per_sm)]

    kernel_cache._split_count = recording
    return seen


def measure_variant(model, args, name: str, out_dir: str, round_: int) -> dict:
    cache = new_cache(model, args.kv, args.slots)
    _write_apart(False)(cache)
    VARIANTS[name](cache)
    splits = split_counts(cache)
    if args.depth:
        fill_randomly(model, cache, args.depth)
    graph = DecodeGraph(model, cache, position=args.depth)
    picks, token = [], 1
    for i in range(32):  # greedy picks from the depth: the same in every variant
        _, token = graph.step(token, args.depth + i, launch_ahead=True)
        picks.append(token)
    graph.forget_ahead()
    tok_s = 1 / decode_tokens(model, cache, 1, args.depth, 128, graph)
    replay_ms = graph.replay_seconds() * 1e3
    row = {"variant": name, "round": round_, "tok_s": round(tok_s, 1),
           "replay_ms": round(replay_ms, 4), "picks": picks,
           "splits": sorted({v for v in splits.values()})}  # fmt: skip
    if round_ == 0:
        trace_replays(graph, args.depth, args.replays, f"{out_dir}/{name}.trace.json")
    del graph, cache
    torch.cuda.empty_cache()
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out_dir")
    parser.add_argument("--variants", nargs="+", default=["main"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kv", default="paged-f16")
    parser.add_argument("--slots", type=int, default=256)
    parser.add_argument("--depth", type=int, default=0, help="positions filled before the steps")
    parser.add_argument("--replays", type=int, default=4)
    args = parser.parse_args()
    info = read_model_info(args.model)
    model = Transformer.load(model_config(info), GGUFTensors(args.model, info), select_ops(DEVICE))
    rows = []
    for round_ in range(args.rounds):
        for name in args.variants:
            rows.append(measure_variant(model, args, name, args.out_dir, round_))
    with open(f"{args.out_dir}/ab.json", "w") as f:
        json.dump(rows, f, indent=1)
    for name in args.variants:
        mine = [r for r in rows if r["variant"] == name]
        tok_s, replay = [r["tok_s"] for r in mine], [r["replay_ms"] for r in mine]
        same = all(r["picks"] == rows[0]["picks"] for r in mine)
        print(f"{name:20s} tok/s {tok_s}  replay ms {replay}  picks as main's first: {same}")


if __name__ == "__main__":
    main()
