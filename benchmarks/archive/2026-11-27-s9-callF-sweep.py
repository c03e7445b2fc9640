# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-callF-sweep*
# (1 files); kept as it ran, so it may name code removed since.
"""session 9 call F: the KV layout (scales and mins interleaved) and 5 programs an SM, timed from
one tree (run from the old tree and the new one, alternately)."""
import json, os, sys
from benchmarks.kernels.attention import measure
from benchmarks.kernels.timing import copy_bandwidth
from kernels.decode_launch import AttentionTuning as AT

tag = sys.argv[1]
bw = copy_bandwidth()
rows = []
plans = [("f16", "f16", 32768, [None])]
for k, v in [("rot4", "rot4"), ("q8", "rot4")]:
    for ctx in (4096, 32768, 131072):
        plans.append((k, v, ctx, [None, AT(max_registers=200), None]))
for k, v, ctx, tunings in plans:
    for r in measure(k, v, ctx, bw, tunings=tuple(tunings)):
        cap = r["tuning"]["max_registers"]
        print(f"{tag:4} {k}/{v} {ctx:>7} {r['us_per_layer']:7.1f} us {r['of_copy']:6.1%}"
              f"{'  max 200 regs' if cap else ''}", flush=True)
        rows.append({**r, "tree": tag})
with open(os.path.join(os.environ["OUT"], f"sweepF-{tag}-{os.getpid()}.json"), "w") as f:
    json.dump(rows, f)
