# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-callD-sweep*
# (1 files); kept as it ran, so it may name code removed since.
"""session 9 call D: launch shapes of rot4/rot4 with flat_v and mask_tail (the new defaults),
each between timings of the default over the same cache; f16 beside it."""
import dataclasses, json, os, sys
from benchmarks.kernels.attention import measure
from benchmarks.kernels.timing import copy_bandwidth
from kernels.decode_launch import AttentionTuning as AT

bw = copy_bandwidth()
print(f"copy {bw/1e9:.0f} GB/s")
plans = [
    ("f16", "f16", 32768, [None, None]),
    ("rot4", "rot4", 32768, [None, AT(num_warps=4), None, AT(num_stages=4), None, AT(num_stages=6),
                            None, AT(num_stages=3), None, AT(sum_after_loop=True), None,
                            AT(num_stages=7), None]),
    ("rot4", "rot4", 4096, [None, AT(num_warps=4), None]),
    ("rot4", "rot4", 131072, [None, AT(num_warps=4), None, AT(num_stages=6), None]),
    ("f16", "f16", 131072, [None, None]),
]
rows = []
for k, v, ctx, tunings in plans:
    for r in measure(k, v, ctx, bw, tunings=tuple(tunings)):
        t = r["tuning"]
        label = f"warps {t['num_warps'] or 'auto'} stages {t['num_stages']}" + (" sum-after" if t["sum_after_loop"] else "")
        print(f"{k}/{v} {ctx:>7} {r['us_per_layer']:7.1f} us  {r['of_copy']:6.1%}  {label}", flush=True)
        rows.append(r)
json.dump(rows, open(os.path.join(os.environ["OUT"], "sweepD.json"), "w"), indent=1)
