"""Where a decode step's time goes inside its CUDA graph: the kernels of graph replays as
CUPTI timestamps them (torch.profiler), one replay's kernels in launch order with their start,
end and the gap or overlap against the kernel before, and per kernel name the time it ran and
the time the GPU ran nothing after it.

    python3 benchmarks/archive/2026-11-30-s29-step-ab.py MODEL.gguf OUT_DIR --variants main ...

Variants (VARIANTS) are set up in turn in one process, each with a fresh cache and graph: tg128
tok/s and graph replay ms each round, and in the first round the timeline of its replays.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import torch

from benchmarks.hearth_speed import DEVICE, decode_tokens, new_cache, sync
from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.decode_graph import DecodeGraph
from engine.hearth.forward import Transformer
from engine.hearth.ops import select_ops
from engine.hearth.weights import GGUFTensors


def kernels_of_replays(graph, n: int, trace: str) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(n):
            graph.step(1, 5 + i, launch_ahead=False)
        sync()
    prof.export_chrome_trace(trace)
    events = [
        {"name": e.name, "start": e.time_range.start, "end": e.time_range.end}
        for e in prof.events()
        if e.device_type.name == "CUDA" and "Memcpy" not in e.name and "Memset" not in e.name
    ]
    return sorted(events, key=lambda e: e["start"])


def split_replays(events: list[dict], n: int) -> list[list[dict]]:
    """The events cut at the n - 1 largest gaps (between replays the host waits)."""
    gaps = sorted(range(1, len(events)), key=lambda i: events[i - 1]["end"] - events[i]["start"])
    cuts = sorted(gaps[: n - 1])
    return [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]


def summary(replay: list[dict]) -> dict:
    run, idle, count = defaultdict(float), defaultdict(float), defaultdict(int)
    rows = []
    for i, e in enumerate(replay):
        short = e["name"][:60]
        run[short] += e["end"] - e["start"]
        count[short] += 1
        gap = e["start"] - replay[i - 1]["end"] if i else 0.0
        if i:
            idle[replay[i - 1]["name"][:60]] += max(gap, 0.0)
        rows.append([short, round(e["start"] - replay[0]["start"], 2),
                     round(e["end"] - e["start"], 2), round(gap, 2)])  # fmt: skip
    span = replay[-1]["end"] - replay[0]["start"]
    busy = sum(e["end"] - e["start"] for e in replay)
    return {
        "span_us": round(span, 1),
        "kernel_us_sum": round(busy, 1),
        "idle_us": round(sum(idle.values()), 1),
        "by_kernel": {
            k: {"n": count[k], "run_us": round(run[k], 1), "idle_after_us": round(idle[k], 1)}
            for k in sorted(run, key=lambda k: -run[k])
        },
        "rows": rows,
    }


VARIANTS = {}  # name -> a function that sets the variant up (the A/B below)


def variant(name):
    def register(setup):
        VARIANTS[name] = setup
        return setup

    return register


@variant("main")
def _main_as_is():
    pass


@variant("no-down-prefetch")
def _gate_up_without_prefetch():
    import kernels.moe_gemv as moe_gemv

    plain = (
        moe_gemv.expert_gate_up.__wrapped__
        if hasattr(moe_gemv.expert_gate_up, "__wrapped__")
        else moe_gemv.expert_gate_up
    )

    def gate_up(*args, prefetch=None, **kwargs):
        return plain(*args, **kwargs)

    gate_up.__wrapped__ = plain
    moe_gemv.expert_gate_up = gate_up


def _restore():
    import kernels.moe_gemv as moe_gemv

    if hasattr(moe_gemv.expert_gate_up, "__wrapped__"):
        moe_gemv.expert_gate_up = moe_gemv.expert_gate_up.__wrapped__


def measure_variant(model, args, name: str, out_dir: str, round_: int) -> dict:
    _restore()
    VARIANTS[name]()
    cache = new_cache(model, args.kv, args.slots)
    graph = DecodeGraph(model, cache, position=0)
    decode_tokens(model, cache, 1, 0, 8, graph)
    tok_s = 1 / decode_tokens(model, cache, 1, 0, 128, graph)
    replay_ms = graph.replay_seconds() * 1e3
    row = {
        "variant": name,
        "round": round_,
        "tok_s": round(tok_s, 1),
        "replay_ms": round(replay_ms, 4),
    }
    if round_ == 0:
        events = kernels_of_replays(graph, args.replays, f"{out_dir}/{name}.trace.json")
        sums = [summary(r) for r in split_replays(events, args.replays)]
        best = min(sums, key=lambda s: s["span_us"])
        with open(f"{out_dir}/{name}.timeline.json", "w") as f:
            json.dump({"spans_us": [s["span_us"] for s in sums], **best}, f, indent=1)
        row["span_us"] = best["span_us"]
        row["idle_us"] = best["idle_us"]
        print(f"{name}: spans {[s['span_us'] for s in sums]} us; kernels summed "
              f"{best['kernel_us_sum']} us, idle {best['idle_us']} us")  # fmt: skip
        for k, v in list(best["by_kernel"].items())[:16]:
            print(
                f"  {k:60s} {v['n']:4d} run {v['run_us']:8.1f} idle after {v['idle_after_us']:7.1f}"
            )
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
        print(f"{name:20s} tok/s {tok_s}  replay ms {replay}")


if __name__ == "__main__":
    main()
