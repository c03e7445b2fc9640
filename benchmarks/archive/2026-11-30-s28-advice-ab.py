"""Session 28: the Hearth engine's load with the uploader's first 512 MiB handed to the kernel's
read-ahead at its start (engine/hearth/upload.py ADVISE_BYTES, this tree) and without
(ADVISE_BYTES = 0), the CUDA context made inside the load as in the app
(benchmarks.hearth_speed_load.hearth_child), beside llama.cpp's; each load in a fresh process,
variants alternating; cold page cache first, then warm.

    python benchmarks/archive/2026-11-30-s28-advice-ab.py MODEL.gguf OUT.json [COLD] [WARM]
"""

import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.hearth_speed_load import drop_page_cache, run_child

VARIANTS = {"no advice": False, "advice (this tree)": True}
CHILD = """
import json, sys
if not {advice}:
    import engine.hearth.upload as u
    u.ADVISE_BYTES = 0
from benchmarks.hearth_speed_load import hearth_child
print(json.dumps(hearth_child(sys.argv[1])))
"""


def hearth(variant: str, model: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD.format(advice=VARIANTS[variant]), model],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


model, out_path = sys.argv[1], sys.argv[2]
rounds = {"cold": int(sys.argv[3]) if len(sys.argv) > 3 else 3,
          "warm": int(sys.argv[4]) if len(sys.argv) > 4 else 2}  # fmt: skip
names = [*VARIANTS, "llama.cpp"]
rows: dict = {state: {n: [] for n in names} for state in rounds}
hearth(names[1], model)  # unmeasured: the kernels compiled, Triton's key kept, the file read
run_child("llama", model)
for state, n in rounds.items():
    for r in range(n):
        for name in names if r % 2 == 0 else names[::-1]:
            if state == "cold" and (why := drop_page_cache()):
                raise SystemExit(why)
            got = run_child("llama", model) if name == "llama.cpp" else hearth(name, model)
            rows[state][name].append(got)
            print(state, name, {k: round(v, 3) for k, v in got.items() if k.endswith("_s")}
                  if "error" not in got else got, flush=True)  # fmt: skip
        Path(out_path).write_text(json.dumps({"rows": rows}, indent=1))
summary = {}
for state in rounds:
    for name in names:
        got = [g for g in rows[state][name] if "load_s" in g]
        if got:
            load = statistics.median(g["load_s"] for g in got)
            first = statistics.median(g["first_token_s"] for g in got)
            summary[f"{state} {name}"] = {"load_s": load, "first_token_s": first}
            print(f"{state:<5} {name:<20} load {load:.2f} s  first token {first:.2f} s")
    ours, theirs = summary.get(f"{state} advice (this tree)"), summary.get(f"{state} llama.cpp")
    if ours and theirs:
        print(f"{state:<5} advice / llama.cpp: load {ours['load_s'] / theirs['load_s']:.2f}x, "
              f"first token {ours['first_token_s'] / theirs['first_token_s']:.2f}x")  # fmt: skip
Path(out_path).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
