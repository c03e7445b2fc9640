# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callA-sweep*
# (2 files); kept as it ran, so it may name code removed since.
"""session 10 call A: with the occupancy counted per sub-partition (kernels/occupancy.py), the
launch shapes that really fit more programs an SM, the chained launches and a 4-warp reduce,
each timed between timings of the default over the same cache."""
import json, os, sys
from benchmarks.kernels.attention import measure
from benchmarks.kernels.attention_anatomy import driver_occupancy
from benchmarks.kernels.timing import copy_bandwidth
from kernels.decode_launch import AttentionTuning as AT

bw = copy_bandwidth()
variants = {
    "chain": AT(chain_launches=True),
    "mr168": AT(max_registers=168),
    "w4mr128": AT(num_warps=4, max_registers=128),
    "rw4": AT(reduce_warps=4),
    "chain+mr168": AT(chain_launches=True, max_registers=168),
}
plans = [("f16", "f16", 32768, ["chain", "rw4"])]
for ctx in (32768, 4096, 131072):
    plans.append(("rot4", "rot4", ctx, list(variants)))
rows = []
for k, v, ctx, names in plans:
    tunings = [None]
    for n in names:
        tunings += [variants[n], None]
    labels = ["default"] + [x for n in names for x in (n, "default")]
    for label, r in zip(labels, measure(k, v, ctx, bw, tunings=tuple(tunings))):
        print(f"{k}/{v} {ctx:>7} {label:12} {r['us_per_layer']:7.1f} us {r['of_copy']:6.1%}", flush=True)
        rows.append({**r, "label": label})
for row in driver_occupancy():
    print("occupancy", row, flush=True)
with open(os.path.join(os.environ["OUT"], "callA-sweep.json"), "w") as f:
    json.dump(rows, f)
