"""The decode attention, its reduce and the KV write compile for sm_90 (Hopper), without a GPU.

Triton's interpreter, which runs the other kernel tests on the CPU, never compiles: a kernel
only the compiler rejects (a rot4 V tile that built in the interpreter failed on the device)
passes there. This compiles them with Triton's bundled ptxas, in a child process because this
directory's conftest puts Triton in interpreter mode, for the K/V pairs whose code paths differ:
K as two rot4 halves, kivi4 pages, or one tile (f16, q8, rot2); V as rot4 halves or one tile
(f16, q8); the masked tail and 2 warps of rot4/rot4.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
ROOT = Path(__file__).resolve().parents[2]
PAIRS = ["rot4/rot4", "q8/rot4", "kivi4/rot4", "rot2/q8", "q8/q8", "f16/f16"]


@pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas (sm_90 compiler) missing")
def test_attention_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "testkit.sm90_compile", *PAIRS],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    compiled = [line for line in done.stdout.splitlines() if "compiled in" in line]
    # the split and a step's write (RoPE in it) per pair, a plain write (the first pair), a
    # batch's write per kivi4 pair (each row's open page slot from a pointer); the reduce,
    # with sinks, and writing its output in 8 bits too (wo's integer GEMV input)
    kivi4_pairs = sum(pair.startswith("kivi4/") for pair in PAIRS)
    # the split writing a step's row, for every pair
    assert len(compiled) == 3 * len(PAIRS) + 1 + kivi4_pairs + 3, done.stdout
    assert any(line.startswith("split writing kivi4/") for line in compiled), done.stdout
    assert any(line.startswith("batch write kivi4/") for line in compiled), done.stdout
