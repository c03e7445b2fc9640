"""A decode step's graph replays from a torch.profiler trace (2026-11-30-s29-step-ab.py's
NAME.trace.json.gz): per kernel, the time it ran and its share of the step's critical path (its
end less the end of the kernel before it), and one stretch of the second replay's kernels in
order with start, duration and the gap after the kernel before (negative: overlapped, a
dependent launch).

    python3 benchmarks/archive/2026-11-30-s29-trace-layers.py TRACE.json.gz [--rows FIRST N]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json

KERNELS = (
    "_expert_kernel", "_one_token_down", "dp4a_gemv_kernel", "_router_kernel",
    "decode_split_kernel", "decode_reduce_kernel", "kv_write_kernel", "_rms_norm_kernel",
    "_swiglu_kernel",
)  # fmt: skip


def replays(path: str) -> list[list[dict]]:
    """The trace's kernels cut where the GPU idled over 30 us (between replays), the longest
    runs of kernels kept (the replays)."""
    with gzip.open(path) as f:
        trace = json.load(f)
    events = sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel"),
                    key=lambda e: e["ts"])  # fmt: skip
    runs: list[list[dict]] = [[]]
    for i, e in enumerate(events):
        if i and e["ts"] - (events[i - 1]["ts"] + events[i - 1]["dur"]) > 30:
            runs.append([])
        runs[-1].append(e)
    longest = max(len(r) for r in runs)
    return [r for r in runs if len(r) == longest]


def short(name: str) -> str:
    return next((k for k in KERNELS if k in name), name[:48])


def critical_path(replay: list[dict]) -> None:
    run, share = collections.defaultdict(float), collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    gap = collections.defaultdict(float)
    for i, e in enumerate(replay):
        k = short(e["name"])
        run[k] += e["dur"]
        count[k] += 1
        end_before = replay[i - 1]["ts"] + replay[i - 1]["dur"] if i else e["ts"]
        gap[k] += e["ts"] - end_before
        share[k] += e["ts"] + e["dur"] - end_before
    print(f"  {'kernel':48s} {'n':>4s} {'ran us':>8s} {'start gap':>10s} {'path us':>8s}")
    for k in sorted(run, key=lambda k: -share[k]):
        print(f"  {k:48s} {count[k]:4d} {run[k]:8.1f} {gap[k]:10.1f} {share[k]:8.1f}")


def stretch(replay: list[dict], first: int, n: int) -> None:
    t0 = replay[0]["ts"]
    for i in range(max(first, 1), min(first + n, len(replay))):
        e, before = replay[i], replay[i - 1]
        gap = e["ts"] - before["ts"] - before["dur"]
        print(f"  {short(e['name']):24s} start {e['ts'] - t0:8.1f} ran {e['dur']:6.1f} "
              f"end {e['ts'] + e['dur'] - t0:8.1f} gap {gap:6.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--rows", type=int, nargs=2, default=(60, 20))
    args = parser.parse_args()
    found = replays(args.trace)
    spans = [round(r[-1]["ts"] + r[-1]["dur"] - r[0]["ts"], 1) for r in found]
    print(f"{args.trace}: {len(found)} replays of {len(found[0])} kernels, spans {spans} us")
    critical_path(found[min(1, len(found) - 1)])
    stretch(found[min(1, len(found) - 1)], *args.rows)


if __name__ == "__main__":
    main()
