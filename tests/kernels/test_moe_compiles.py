"""The expert GEMV (every mode, the down rounding h itself; the one-token down), the router
(as norm_and_route launches it) and the routing chosen before the FFN norm (router_scores,
wo's GEMV with its picking program) compile for sm_90 (Hopper) without a GPU, without spills:
benchmarks/kernels/moe_sass.py in a child process (this directory's conftest puts Triton in
interpreter mode, which never compiles)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not CUOBJDUMP.exists(), reason="Triton's bundled cuobjdump missing")
def test_expert_gemv_and_router_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.kernels.moe_sass"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if " regs, stack " in line]
    # 6 expert GEMV cases (the downs from float h) and 2 routers, at 1 and 16 tokens, the 2
    # gate/ups letting the next launch in early, the two one-token downs for Qwen3-30B-A3B's,
    # and its routing chosen before the norm (2 launches)
    assert len(lines) == 2 * (6 + 2) + 2 + 2 + 2, done.stdout
    assert sum(line.endswith("early_next") for line in lines) == 2, done.stdout
    assert sum("dense down" in line for line in lines) == 1, done.stdout
    assert sum("one-token down" in line for line in lines) == 1, done.stdout
    assert sum("norm_and_route" in line for line in lines) == 4, done.stdout
    assert sum(": router_scores" in line or ": wo_and_picks" in line for line in lines) == 2
    assert all("stack   0," in line for line in lines), done.stdout  # no spills
