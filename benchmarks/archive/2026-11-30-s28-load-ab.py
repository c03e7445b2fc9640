"""Session 28: the Hearth engine's load from a cold and a warm page cache with Triton's cache
key kept in its cache folder (kernels/compiler_warmup.use_kept_key, this tree) and hashed in
every process (as before), beside llama.cpp's, each load in a fresh process
(benchmarks.hearth_speed_load's children), variants alternating; the warm-up thread's own
time in each Hearth child.

    python benchmarks/archive/2026-11-30-s28-load-ab.py MODEL.gguf OUT.json [ROUNDS]
"""

import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.hearth_speed_load import drop_page_cache, run_child

VARIANTS = {  # name: the kept key used
    "key hashed (before)": False,
    "key kept (this tree)": True,
}
CHILD = """
import json, sys, time
import kernels.compiler_warmup as w
if not {kept}:
    def hashed():
        import triton.runtime.cache as c
        return c.triton_key()
    w.use_kept_key = hashed
spent = {{}}
warm = w.warm_compiler
def timed():
    t = time.perf_counter()
    warm()
    spent["warmup_s"] = time.perf_counter() - t
w.warm_compiler = timed
from benchmarks.hearth_speed_load import hearth_child
got = hearth_child(sys.argv[1])
got.update(spent)
print(json.dumps(got))
"""


def hearth(variant: str, model: str) -> dict:
    code = CHILD.format(kept=VARIANTS[variant])
    done = subprocess.run(
        [sys.executable, "-c", code, model], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


model, out_path = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
names = [*VARIANTS, "llama.cpp"]
rows: dict = {state: {n: [] for n in names} for state in ("cold", "warm")}
hearth(names[1], model)  # unmeasured: the kernels compiled, the file read once, the key kept
run_child("llama", model)
for state in ("cold", "warm"):
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            if state == "cold" and (why := drop_page_cache()):
                raise SystemExit(why)
            got = run_child("llama", model) if name == "llama.cpp" else hearth(name, model)
            rows[state][name].append(got)
            print(state, name, {k: round(v, 3) for k, v in got.items() if k.endswith("_s")}
                  if "error" not in got else got, flush=True)  # fmt: skip
summary = {}
for state in ("cold", "warm"):
    for name in names:
        got = [g for g in rows[state][name] if "load_s" in g]
        if got:
            load = statistics.median(g["load_s"] for g in got)
            first = statistics.median(g["first_token_s"] for g in got)
            summary[f"{state} {name}"] = {"load_s": load, "first_token_s": first}
            print(f"{state:<5} {name:<24} load {load:.2f} s  first token {first:.2f} s")
for state in ("cold", "warm"):
    ours = summary.get(f"{state} key kept (this tree)")
    theirs = summary.get(f"{state} llama.cpp")
    if ours and theirs:
        print(f"{state:<5} kept / llama.cpp: load {ours['load_s'] / theirs['load_s']:.2f}x, "
              f"first token {ours['first_token_s'] / theirs['first_token_s']:.2f}x")  # fmt: skip
Path(out_path).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
