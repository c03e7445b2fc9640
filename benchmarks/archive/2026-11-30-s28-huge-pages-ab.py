"""Session 28: ggml's repacked experts on huge pages (engine/hearth/host_pages.py, this tree)
against 4 KiB pages (prefer_huge_pages a no-op), Qwen3-30B-A3B with 20 layers' experts in RAM:
the split of 3 picks by the CPU and every pick by the CPU (benchmarks.moe_offload hearth mode,
no memory hog: speed only), each in a fresh process, variants alternating; each child's
AnonHugePages (/proc/self/smaps_rollup) at its end.

    python benchmarks/archive/2026-11-30-s28-huge-pages-ab.py MODEL.gguf OUT.json [ROUNDS]
"""

import json
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys
if not {huge}:
    import engine.hearth.cpu_experts as c
    c.prefer_huge_pages = lambda address, nbytes: False
import contextlib, io
from benchmarks.moe_offload import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["hearth", "--model", sys.argv[1], "--ram-layers", "20", "--cpu-picks", sys.argv[2]])
got = json.loads(out.getvalue().strip().splitlines()[-1])
rollup = open("/proc/self/smaps_rollup").read().splitlines()
got["anon_huge_kb"] = [int(l.split()[1]) for l in rollup if l.startswith("AnonHugePages")][0]
print(json.dumps(got))
"""
KEYS = ("tg128_tok_s", "split_wait_us", "split_ggml_us", "split_host_us", "host_us_per_layer_token",
        "anon_huge_kb", "load_s")


def child(huge: bool, model: str, picks: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD.format(huge=huge), model, str(picks)],
                          capture_output=True, text=True, timeout=200)  # fmt: skip
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-600:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


model, out_path = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
rows = []
for r in range(rounds):
    for picks in (3, 8):
        for huge in ((True, False) if r % 2 == 0 else (False, True)):
            got = child(huge, model, picks)
            got.update(huge_pages=huge, picks=picks, round=r)
            rows.append(got)
            print({k: (round(v, 1) if isinstance(v, float) else v) for k, v in got.items()
                   if k in KEYS + ("huge_pages", "picks", "error")}, flush=True)  # fmt: skip
Path(out_path).write_text(json.dumps(rows, indent=1))
