"""benchmarks.hearth_speed with two of the engine's choices patched for one measurement (session
20's fourth device call), so that a candidate and main are timed in the same call:

    python benchmarks/archive/2026-11-29-s20-patched_speed.py [--tiles TILES.txt] [--router-waits]
        -- MODEL.gguf [hearth_speed's arguments]

--tiles: integer_config's tile a format changed to the one that benchmarks.kernels.gemv_tiles
printed fastest in TILES.txt, weighted by the launches a Qwen3-30B-A3B decode step makes of each
shape. --router-waits: the router lets nothing in early (kernels.moe_router.LET_EXPERTS_IN_EARLY
off: the expert GEMV's gate/up starts once the router has ended, as on main before it).
"""

from __future__ import annotations

import argparse
import ast
import collections
import dataclasses
import re
import sys

LAUNCHES = {"attn_qkv": 24, "attn_qk": 24, "attn_v": 24, "attn_output": 48, "output": 1}


def best_changes(path: str) -> dict[str, dict]:
    cost = collections.defaultdict(float)
    for line in open(path):
        m = re.match(r"^(\S+)\s+(Q\d_K)\s+\d+ x \d+: (.+?)\s+([\d.]+) us", line)
        if m and m[1] in LAUNCHES:
            cost[(m[2], m[3])] += LAUNCHES[m[1]] * float(m[4])
    best = {}
    for (fmt, label), us in sorted(cost.items(), key=lambda kv: kv[1]):
        best.setdefault(fmt, (label, us))
    print("weighted us a step:", {f"{f} {label}": round(v, 1) for (f, label), v in cost.items()})
    print("best:", best)
    return {
        fmt: {} if label == "default"
        else {k: ast.literal_eval(v) for k, v in (item.split("=") for item in label.split(", "))}
        for fmt, (label, _) in best.items()
    }  # fmt: skip


def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiles")
    parser.add_argument("--router-waits", action="store_true")
    args = parser.parse_args(argv[:split])
    if args.tiles:
        import kernels.gemv as gemv

        changes = best_changes(args.tiles)
        original = gemv.integer_config

        def patched(fmt: str):
            cfg = dataclasses.replace(original(fmt), **changes.get(fmt, {}))
            return dataclasses.replace(cfg, rows_in_thread=cfg.rows_in_thread and cfg.block_n >= 4)

        gemv.integer_config = patched
    if args.router_waits:
        import kernels.moe_router

        kernels.moe_router.LET_EXPERTS_IN_EARLY = False
        print("router: lets nothing in early")
    from benchmarks import hearth_speed

    return hearth_speed.main(argv[split + 1 :])


if __name__ == "__main__":
    raise SystemExit(main())
