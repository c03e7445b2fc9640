"""Experts in RAM, split: ggml's thread count swept in one process, in turn, on one loaded model.

The split's pause (engine/hearth/staged_experts.py) has two threads of its own beside ggml's
team: the stepping thread (ggml's thread 0) and the copier. With ggml's team on every core but
one, a trace showed the copier's first copy starting 80 us after it woke and its graph launch
taking 67 us (2026-11-30-s33-call-2). This loads the model once (trace-split's `load`) and runs
rounds of decode steps at each thread count (ggml_backend_cpu_set_n_threads between them),
printing tok/s and the pause's parts: ggml, the stepping thread's wait, the copier's time from
its wake to the first copy issued and to all of them, its launch.

    python3 benchmarks/archive/2026-11-30-s33-threads-sweep.py MODEL OUT_DIR \
        [--threads 15,13,11,9] [--rounds 3] [--steps 64]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time

sys.path.insert(0, ".")


def _trace_split():
    spec = importlib.util.spec_from_file_location(
        "trace_split", "benchmarks/archive/2026-11-30-s33-trace-split.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--ram-layers", type=int, default=20)
    parser.add_argument("--cpu-picks", type=int, default=3)
    parser.add_argument("--threads", default="15,13,11,9")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=64)
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    args.cpu_threads = threads[0]
    import torch

    from engine.hearth.ggml_cpu import ggml
    from engine.hearth.staged_experts import StagedExperts

    model, graph, rng, config = _trace_split().load(args)
    found = [layer.moe.experts for layer in model.layers if layer.moe is not None]
    staged = [e for e in found if isinstance(e, StagedExperts)]
    areas = list({id(e.area): e.area for e in staged}.values())
    cpu = staged[0].cpu.cpu
    first = {"s": 0.0}
    for area in areas:  # the copier's time from its wake to its first copy issued
        issue = area._issue

        def timed(whole, experts, stream, issue=issue, area=area):
            began = time.perf_counter()
            if experts:
                issue(whole, experts[:1], stream)
                first["s"] += time.perf_counter() - began
                issue_rest(area, whole, experts, stream)
            else:
                issue(whole, experts, stream)

        area._issue = timed

    def issue_rest(area, whole, experts, stream):
        # the rest into slots 1.. (the area's _issue copies into slots 0..: shift by hand)
        import ctypes

        from engine.hearth.staged_experts import _copy_function

        copy, row = _copy_function(), area.row
        for slot, expert in enumerate(experts[1:], start=1):
            if stream is None:
                area.staged[slot].copy_(whole[int(expert)])
                continue
            dst = area.staged.data_ptr() + slot * row
            status = copy(dst, whole.data_ptr() + int(expert) * row, row, ctypes.c_void_p(stream))
            assert status == 0, status

    def totals():
        return {
            "ggml": sum(e.ggml_s for e in staged),
            "host": sum(e.host_s for e in staged),
            "steps": sum(e.steps for e in staged),
            "wait": graph.waits.seconds,
            "issue": sum(a.issue_s for a in areas),
            "launch": sum(a.launch_s for a in areas),
            "first": first["s"],
        }

    rows = []
    position = 64
    with torch.inference_mode():
        for r in range(args.rounds):
            for n in threads:
                ggml().backend_cpu_set_n_threads(cpu.backend, n)
                for _ in range(8):
                    graph.step(rng.randrange(config.n_vocab), position, launch_ahead=False)
                    position += 1
                before = totals()
                began = time.perf_counter()
                for _ in range(args.steps):
                    graph.step(rng.randrange(config.n_vocab), position, launch_ahead=False)
                    position += 1
                seconds = time.perf_counter() - began
                after = totals()
                pauses = after["steps"] - before["steps"]
                row = {"round": r, "threads": n, "tok_s": args.steps / seconds}
                for k in ("ggml", "host", "wait", "issue", "launch", "first"):
                    row[f"{k}_us"] = (after[k] - before[k]) / pauses * 1e6
                rows.append(row)
                print(" ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                               for k, v in row.items()), flush=True)  # fmt: skip
                if position > 900:
                    position = 64
    for n in threads:
        got = [row["tok_s"] for row in rows if row["threads"] == n]
        print(f"threads {n}: median {statistics.median(got):.1f} tok/s of {got}")
    with open(f"{args.out}/threads-sweep.json", "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
