"""Whether an AttentionTuning flag should become the default, from one run's attention table.

    python -m benchmarks.kernels.attention_flags attention.json [--flag FLAG ...]

Reads the JSON of `python -m benchmarks.kernels --flag FLAG ... --json attention.json`, where
each pair a flag applies to was timed with the default before and after each flag over the
same cache (attention.flag_comparison). Per flag, pair and context it prints the default (the
mean of its timings), the flag's time (that flag alone on), the gain and the spread (the
defaults' largest difference: a gain smaller than it is noise, docs/kernels.md). The verdict
per flag and pair: make it default only where it gains more than the spread at every context
measured; else keep it off.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from benchmarks.kernels.attention import FLAGS, default_flags, flags_changed


def compare(rows: list[dict], flag: str) -> dict[tuple[str, str], list[dict]]:
    """Per K/V pair, one comparison per context: default, flag on (alone), gain and spread
    (us). Rows with another flag on are not this flag's. flag may name several joined by
    '+' (all of them on together, flag_comparison's last timing)."""
    wanted = set(flag.split("+"))
    timings: dict[tuple, dict[bool, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        on_flags = set(flags_changed(r["tuning"]))
        if on_flags and on_flags != wanted:
            continue
        on = bool(on_flags)
        timings[(r["k"], r["v"], r["context"], r["window"])][on].append(r["us_per_layer"])
    found: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for (k, v, context, window), by_flag in sorted(timings.items()):
        off, on = by_flag[False], by_flag[True]
        if len(off) < 2 or not on:  # the flag does not apply here, or a timing failed
            continue
        default = sum(off) / len(off)
        found[(k, v)].append({
            "context": context, "window": window, "default_us": default, "flag_us": on[0],
            "gain_us": default - on[0], "spread_us": max(off) - min(off),
        })  # fmt: skip
    return dict(found)


def flag_default(flag: str, k_format: str, v_format: str) -> bool:
    """Whether AttentionTuning has this flag (every one of a '+' join) on by default for this
    K/V pair (mask_tail: by pair)."""
    default = default_flags(k_format, v_format)
    return all(default[f] for f in flag.split("+"))


def verdict(comparisons: list[dict]) -> bool:
    """Make the flag default: it gains more than the run's spread at every context."""
    return bool(comparisons) and all(c["gain_us"] > c["spread_us"] for c in comparisons)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels.attention_flags")
    parser.add_argument("json", help="the JSON of python -m benchmarks.kernels --flag FLAG")
    parser.add_argument("--flag", action="append", choices=FLAGS)
    args = parser.parse_args(argv)
    with open(args.json) as f:
        rows = json.load(f).get("attention", [])
    missing = 0
    flags = args.flag or list(FLAGS)
    for flag in flags + (["+".join(flags)] if len(flags) > 1 else []):
        found = compare(rows, flag)
        if not found:
            print(f"no pair timed with and without {flag} (was --flag {flag} given?)")
            missing += 1
        for (k, v), comparisons in found.items():
            for c in comparisons:
                print(f"{k}/{v:5} {c['context']:>7}: default {c['default_us']:6.1f} us, "
                      f"{flag} {c['flag_us']:6.1f} us, gain {c['gain_us']:+5.1f} "
                      f"(spread {c['spread_us']:.1f})")  # fmt: skip
            on = flag_default(flag, k, v)
            decision = (
                ("make it default" if verdict(comparisons) else "keep it off")
                if not on
                else ("turn the default off" if verdict(comparisons) else "keep it on")
            )
            print(f"{k}/{v}: {flag}: {decision}")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
