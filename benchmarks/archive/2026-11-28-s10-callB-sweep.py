# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callB-sweep*
# (2 files); kept as it ran, so it may name code removed since.
"""session 10 call B: the reduce's warps, splits rounded to a power of two, the first pages asked
into L2, chained launches, each timed between timings of the default over the same cache."""
import json, os
from benchmarks.kernels.attention import measure
from benchmarks.kernels.attention_anatomy import driver_occupancy
from benchmarks.kernels.timing import copy_bandwidth
from kernels.decode_launch import AttentionTuning as AT

bw = copy_bandwidth()
V = {
    "rw4": AT(reduce_warps=4), "rw2": AT(reduce_warps=2), "p2": AT(power_of_two_splits=True),
    "rw4+p2": AT(reduce_warps=4, power_of_two_splits=True),
    "rw2+p2": AT(reduce_warps=2, power_of_two_splits=True),
    "pf1": AT(prefetch_pages=1), "pf2": AT(prefetch_pages=2), "pf4": AT(prefetch_pages=4),
    "rw4+chain": AT(reduce_warps=4, chain_launches=True),
    "rw4+p2+chain": AT(reduce_warps=4, power_of_two_splits=True, chain_launches=True),
    "rw4+p2+pf2": AT(reduce_warps=4, power_of_two_splits=True, prefetch_pages=2),
    "rw4+p2+chain+pf2": AT(reduce_warps=4, power_of_two_splits=True, chain_launches=True, prefetch_pages=2),
    "mr200": AT(max_registers=200),
}
rot = list(V)
f16 = ["rw4", "rw2", "pf2", "rw4+chain", "rw4+p2+pf2"]
plans = [("f16", "f16", 32768, f16), ("rot4", "rot4", 32768, rot), ("rot4", "rot4", 4096, rot),
         ("rot4", "rot4", 131072, rot), ("f16", "f16", 4096, f16), ("f16", "f16", 131072, f16),
         ("q8", "rot4", 32768, ["rw4", "rw4+p2", "rw4+chain", "pf2"])]
rows = []
for k, v, ctx, names in plans:
    tunings, labels = [None], ["default"]
    for n in names:
        tunings += [V[n], None]
        labels += [n, "default"]
    for label, r in zip(labels, measure(k, v, ctx, bw, tunings=tuple(tunings))):
        print(f"{k}/{v} {ctx:>7} {label:18} {r['us_per_layer']:7.1f} us {r['of_copy']:6.1%}", flush=True)
        rows.append({**r, "label": label})
for row in driver_occupancy():
    print("occupancy", row, flush=True)
with open(os.path.join(os.environ["OUT"], "callB-sweep.json"), "w") as f:
    json.dump(rows, f)
