"""The integer MMA GEMM (kernels/quant_mma.py) compiles for sm_90 (Hopper) without a GPU, at
default_config's launch shapes for Q4_K and Q6_K (16, 32 and 64 rows of x; K split on a
4096-row matrix, not on a 14336-row one), a step of 2 pieces and no prefetch; its int8 dots
become wgmma (s8 x s8 -> s32), and ptxas spills no register (a default that spills is a slow
one). Triton's interpreter (the other tests) never compiles; this runs Triton's bundled ptxas
in a child process, because this directory's conftest puts Triton in interpreter mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
ROOT = Path(__file__).resolve().parents[2]

# the planes as quant_mma.plane_args passes them; x as quantize_activation's buffers
CHILD = """
import dataclasses, os, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.quant_mma import default_config, quant_mma_kernel
from kernels.split_k import split_plan

PTXAS = sys.argv[1]
PLANES = {"Q4_K": ("*fp16", "*fp16", "*i32", "*u8"), "Q6_K": ("*u8", "*u8", "*i8", "*fp16")}
X = {"xq_ptr": "*i8", "xd_ptr": "*fp32", "xs_ptr": "*i32", "out_ptr": "*fp16",
     "part_ptr": "*fp32", "count_ptr": "*i32"}
fn = quant_mma_kernel
for fmt, planes in PLANES.items():
    n_in = 14336 if fmt == "Q6_K" else 4096  # ffn_down, attn_q/o and the like
    cases = [(rows, 4096, default_config(rows, 4096, n_in)) for rows in (16, 32, 64)]
    cases.append((64, 14336, default_config(64, 14336, n_in)))
    cases.append((16, 4096, dataclasses.replace(default_config(16, 4096, n_in), step=2)))
    cases.append((32, 4096, dataclasses.replace(default_config(32, 4096, n_in), prefetch=False)))
    for rows, n_out, cfg in cases:
        consts = {"Q6": fmt == "Q6_K", "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
                  "STEP": cfg.step, "SPLIT_K": cfg.split_k > 1,
                  "PREFETCH": cfg.prefetch}
        per_split, splits = split_plan(n_in // 256, cfg.split_k)
        # the integers as a launch passes them: Triton specializes those divisible by 16
        ints = {"M": rows, "N": n_out, "K": n_in, "NB": n_in // 256, "stride_om": n_out,
                "blocks_per_split": per_split, "n_splits": splits}
        types = {**X, **dict(zip(["p0", "p1", "p2", "p3"], planes))}
        sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
        aligned = [i for i, a in enumerate(fn.arg_names)
                   if sig[a][0] == "*" or ints.get(a, 1) % 16 == 0]
        src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v
                                             for k, v in consts.items()},
                        attrs={(i,): [["tt.divisibility", 16]] for i in aligned})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        ptx = k.asm["ptx"]
        mma = sorted(set(re.findall(r"(wgmma\\.mma_async|mma\\.sync)\\S*\\.s32\\.s8\\.s8", ptx)))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "k.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            info = subprocess.run([PTXAS, "-arch=sm_90a", "-v", path, "-o", path + ".o"],
                                  capture_output=True, text=True, check=True).stderr
        spills = re.search(r"(\\d+) bytes spill stores", info).group(1)
        print(fmt, rows, n_out, cfg.step, cfg.split_k > 1, ",".join(mma) or "none",
              "spills", spills, flush=True)
"""


@pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas (sm_90 compiler) missing")
def test_quant_mma_compiles_for_sm90_with_int8_wgmma():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(PTXAS)], capture_output=True, text=True, cwd=ROOT,
        env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    expected = [
        f"{fmt} {rows} {n_out} {step} {split} wgmma.mma_async spills 0"
        for fmt in ("Q4_K", "Q6_K")
        for rows, n_out, step, split in (
            (16, 4096, 1, True), (32, 4096, 1, True), (64, 4096, 1, True),
            (64, 14336, 1, False), (16, 4096, 2, True), (32, 4096, 1, True),
        )
    ]  # fmt: skip
    assert done.stdout.split("\n")[:-1] == expected
