"""The packed GEMM compiles for sm_90 (Hopper) without a GPU, at default_config's launch
shapes for Q4_K and Q6_K: blocks of 64 and 128 rows on wgmma, 16 rows on mma.sync. Triton's
interpreter (the other tests) never compiles; this runs Triton's bundled ptxas in a child
process, because this directory's conftest puts Triton in interpreter mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
ROOT = Path(__file__).resolve().parents[2]

# each format's planes as plane_args passes them (moe_blocks.load_pairs' p0..p4)
CHILD = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.moe_blocks import FORMAT_CODES
from kernels.packed_gemm import _quant_gemm_kernel, default_config

PLANES = {"Q4_K": ("*fp16", "*fp16", "*i32", "*i32", "*i32"),
          "Q6_K": ("*i32", "*i32", "*i8", "*fp16", "*fp16")}
fn = _quant_gemm_kernel
for fmt, planes in PLANES.items():
    for rows in (16, 64, 512):
        cfg = default_config(rows)
        consts = {"FMT": FORMAT_CODES[fmt], "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
                  "NG": cfg.ng}
        types = {"x_ptr": "*fp16", "out_ptr": "*fp16", **dict(zip(["p0", "p1", "p2", "p3", "p4"],
                 planes))}
        sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
        src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v
                                             for k, v in consts.items()})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        ptx = k.asm["ptx"]
        print(fmt, cfg.block_m, "wgmma" if "wgmma" in ptx else "mma.sync" if "mma.sync" in ptx
              else "none")
"""


@pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas (sm_90 compiler) missing")
def test_packed_gemm_compiles_for_sm90_on_the_tensor_cores():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=ROOT, env=env,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split("\n")[:-1] == [
        f"{fmt} {bm} {mma}"
        for fmt in ("Q4_K", "Q6_K")
        for bm, mma in ((16, "mma.sync"), (64, "wgmma"), (128, "wgmma"))
    ]
