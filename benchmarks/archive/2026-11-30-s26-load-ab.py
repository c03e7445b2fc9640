"""Session 26: the Hearth engine's load from a cold and a warm page cache with the uploader's
reads at several sizes and thread counts (engine/hearth/upload.py), with and without Triton's
setup started in the background (kernels/compiler_warmup.py), beside llama.cpp's, each load
in a fresh process (benchmarks.hearth_speed_load's children), variants alternating.

    python benchmarks/archive/2026-11-30-s26-load-ab.py MODEL.gguf OUT.json [ROUNDS]
"""

import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.hearth_speed_load import drop_page_cache, run_child

MIB = 1 << 20
VARIANTS = {  # name: (chunk MiB, readers, slots, Triton's setup in the background)
    "8 x 8 MiB, 16 slots, no warm-up (before)": (8, 8, 16, False),
    "8 x 8 MiB, 16 slots": (8, 8, 16, True),
    "8 x 32 MiB, 12 slots": (32, 8, 12, True),
    "12 x 32 MiB, 16 slots": (32, 12, 16, True),
    "16 x 32 MiB, 20 slots": (32, 16, 20, True),
}
CHILD = """
import json, sys
import engine.hearth.upload as u
u.CHUNK_BYTES, u.N_READERS, u.N_SLOTS = {chunk} * {mib}, {readers}, {slots}
if not {warm}:
    import kernels.compiler_warmup as w
    w.warm_compiler_in_background = lambda: None
from benchmarks.hearth_speed_load import hearth_child
print(json.dumps(hearth_child(sys.argv[1])))
"""


def hearth(variant: str, model: str) -> dict:
    chunk, readers, slots, warm = VARIANTS[variant]
    code = CHILD.format(chunk=chunk, mib=MIB, readers=readers, slots=slots, warm=warm)
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
hearth(names[1], model)  # unmeasured: the kernels compiled, the file read once
run_child("llama", model)
for state in ("cold", "warm"):
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            if state == "cold" and (why := drop_page_cache()):
                raise SystemExit(why)
            got = run_child("llama", model) if name == "llama.cpp" else hearth(name, model)
            rows[state][name].append(got)
            print(
                state,
                name,
                {k: round(v, 3) for k, v in got.items() if k.endswith("_s")}
                if "error" not in got
                else got,
                flush=True,
            )
summary = {}
for state in ("cold", "warm"):
    for name in names:
        got = [g for g in rows[state][name] if "load_s" in g]
        if got:
            load = statistics.median(g["load_s"] for g in got)
            first = statistics.median(g["first_token_s"] for g in got)
            summary[f"{state} {name}"] = {"load_s": load, "first_token_s": first}
            print(f"{state:<5} {name:<42} load {load:.2f} s  first token {first:.2f} s")
Path(out_path).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
