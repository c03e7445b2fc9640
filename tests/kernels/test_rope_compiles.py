"""The fused RoPE kernel (bias, per-head RMS norm, rotation in one launch: kernels/rope.py)
compiles for sm_90 without a GPU, in every combination the engine launches: Triton's
interpreter, which runs tests/kernels/test_rope.py, never compiles. A child process, since this
directory's conftest puts Triton in interpreter mode (test_attention_compiles.py does the same
for the attention kernels)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
ROOT = Path(__file__).resolve().parents[2]
CHILD = """
from testkit.sm90_compile import _compile
from kernels.rope import _rope_kernel
types = {"x_ptr": "*fp16", "out_ptr": "*fp16", "pos_ptr": "*i32", "inv_freq_ptr": "*fp32",
         "mscale": "fp32", "bias_ptr": "*fp32", "q_norm_ptr": "*fp32", "k_norm_ptr": "*fp32",
         "eps": "fp32"}
for neox in (False, True):
    for bias, norm in ((False, False), (True, False), (False, True), (True, True)):
        consts = dict(HEADS=4, D=128, N_ROT=128, NEOX=neox, HAS_BIAS=bias, HAS_NORM=norm)
        _compile(_rope_kernel, consts, types, {"num_warps": 4})
        print("compiled", neox, bias, norm)
"""


@pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas (sm_90 compiler) missing")
def test_the_fused_rope_compiles_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("compiled") == 8, done.stdout
