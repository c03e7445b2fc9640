"""Variants of a decode step's launches A/B'd in one process, and where the step's time goes
inside its CUDA graph (a torch.profiler trace of graph replays: CUPTI's kernel timestamps, read
by 2026-11-30-s29-trace-layers.py).

    python3 benchmarks/archive/2026-11-30-s29-step-ab.py MODEL.gguf OUT_DIR --variants main ...

Variants (VARIANTS) are set up in turn in one process, each with a fresh cache and graph: tg128
tok/s and graph replay ms each round, and in the first round a trace of 4 replays.
"""

from __future__ import annotations

import argparse
import json

import torch

from benchmarks.hearth_speed import DEVICE, decode_tokens, new_cache, sync
from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.decode_graph import DecodeGraph
from engine.hearth.forward import Transformer
from engine.hearth.ops import select_ops
from engine.hearth.weights import GGUFTensors


def trace_replays(graph, n: int, trace: str) -> None:
    """n graph replays under torch.profiler (CUPTI's kernel timestamps), as a Chrome trace:
    2026-11-30-s29-trace-layers.py reads it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(n):
            graph.step(1, 5 + i, launch_ahead=False)
        sync()
    prof.export_chrome_trace(trace)


def _flags(norm: bool = False, gate_up: bool = False, down: bool = False) -> None:
    import kernels.moe_gemv as moe_gemv
    import kernels.moe_one_token as moe_one_token
    import kernels.norms as norms

    norms.DEPENDENT_LAUNCH = norm
    moe_gemv.EARLY_NEXT = gate_up
    moe_one_token.EARLY_NEXT = down


VARIANTS = {
    "main": _flags,
    # the norm a dependent launch, its weights read before the wait
    "norm-dependent": lambda: _flags(norm=True),
    # and the one-token gate/up letting the down launch once its programs have their weights
    "norm-gate-up-early": lambda: _flags(norm=True, gate_up=True),
    # and the one-token down letting the norm launch likewise
    "norm-both-early": lambda: _flags(norm=True, gate_up=True, down=True),
}


def measure_variant(model, args, name: str, out_dir: str, round_: int) -> dict:
    VARIANTS[name]()
    cache = new_cache(model, args.kv, args.slots)
    graph = DecodeGraph(model, cache, position=0)
    picks, token = [], 1
    for i in range(32):  # greedy picks from position 0: the same in every variant
        _, token = graph.step(token, i, launch_ahead=True)
        picks.append(token)
    graph.forget_ahead()
    tok_s = 1 / decode_tokens(model, cache, 1, 0, 128, graph)
    replay_ms = graph.replay_seconds() * 1e3
    row = {"variant": name, "round": round_, "tok_s": round(tok_s, 1),
           "replay_ms": round(replay_ms, 4), "picks": picks}  # fmt: skip
    if round_ == 0:
        trace_replays(graph, args.replays, f"{out_dir}/{name}.trace.json")
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
