"""Compile the MoE prefill grouped GEMM (kernels/moe_grouped_gemm.py) for sm_90 on a machine
without a GPU: registers, stack (spills), instructions and what kind they are.

    python -m benchmarks.kernels.moe_grouped_sass [--sweep]

Each format's gate+up (gate and up of one format, SiLU; MXFP4 with gpt-oss's biases and
clamped SwiGLU) and down, as `_launch` compiles them at default_config's shape for blocks of
16, 64 and 128 pairs (Qwen3-30B-A3B's chunks of 65-170 tokens, the 512-token chunks of it and
of gpt-oss-20b), with Triton's bundled ptxas and cuobjdump. Columns: wgmma (HGMMA), int-to-float
conversions (I2F), float-to-f16 ones (F2F/F2FP), f16x2 FMAs (HFMA2), byte permutes (PRMT),
cp.async copies (LDGSTS); where the f16 weights reach wgmma from (registers or shared memory)
and whether ptxas serialized the wgmmas (its C7515 note). --sweep: benchmarks/kernels/
moe_prefill.py's SWEEP shapes: Q4_K gate+up, Q6_K down, MXFP4 both.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from benchmarks.kernels.moe_sass import PLANES, _sass, usage
from kernels import moe_grouped_gemm as gg
from kernels.moe_blocks import FORMAT_CODES

FORMATS = ["Q4_K", "Q5_K", "Q6_K", "Q8_0", "MXFP4", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]


def compile_sm90(fmt: str, gate_up: bool, cfg: gg.GroupedConfig, n_expert: int = 128):
    """The grouped kernel as _launch compiles it: x f16 (h for the down), out f16 / float32."""
    fn = gg._grouped_kernel
    bias = fmt == "MXFP4"
    consts = dict(
        FMT_A=FORMAT_CODES[fmt], FMT_B=FORMAT_CODES[fmt], GATE_UP=gate_up,
        ACT=gg._OAI if bias else gg._SILU, HAS_BIAS=bias, BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n, NG=cfg.ng, E_PAD=triton.next_power_of_2(n_expert), ASM=True,
    )  # fmt: skip
    types = {
        "x_ptr": "*fp16", "out_ptr": "*fp16" if gate_up else "*fp32", "bias_a_ptr": "*fp32",
        "bias_b_ptr": "*fp32", "sorted_ptr": "*i32", "block_end_ptr": "*i32",
        "count_ptr": "*i32", "weights_ptr": "*fp32", "alpha": "fp32", "limit": "fp32",
    }  # fmt: skip
    for i, t in enumerate(PLANES[fmt]):
        types[f"a{i}"] = types[f"b{i}"] = t
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    aligned = [i for i, a in enumerate(fn.arg_names) if signature[a][0] == "*" or a in "NK"]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"


def wgmma_of(kernel) -> str:
    """ "registers" or "shared" (where the f16 weights, wgmma's A operand, come from: a
    {register list} or a shared-memory descriptor), then "pipelined" or "serialized" (ptxas's
    C7515 note: every wgmma waited for before the next is issued)."""
    ptx = kernel.asm["ptx"]
    from_registers = re.search(r"wgmma\.mma_async\S*\.f16\.f16\s+\{[^}]*\},\s*\{", ptx)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        info = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", str(path), "-o", f"{path}.o"],
                              capture_output=True, text=True, check=True).stderr  # fmt: skip
    return (f"A from {'registers' if from_registers else 'shared'}, "
            f"{'serialized' if 'C7515' in info else 'pipelined'}")  # fmt: skip


KINDS = {"HGMMA": r"\bHGMMA\b", "HMMA": r"\bHMMA\b", "I2F": r"\bI2F", "F2F": r"\bF2FP?\b",
         "HFMA2": r"\bHFMA2\b", "PRMT": r"\bPRMT\b", "LDGSTS": r"\bLDGSTS\b"}  # fmt: skip


def line(fmt: str, gate_up: bool, cfg: gg.GroupedConfig) -> str:
    kernel = compile_sm90(fmt, gate_up, cfg)
    regs, stack, n_all = usage(kernel)
    sass = _sass(kernel)[1]
    kinds = " ".join(f"{k} {len(re.findall(p, sass)):4}" for k, p in KINDS.items())
    shape = f"bm{cfg.block_m} bn{cfg.block_n} ng{cfg.ng} w{cfg.num_warps} s{cfg.num_stages}"
    return (f"{fmt:5} {'gate+up' if gate_up else 'down':7} {shape:26} {regs:3} regs, stack "
            f"{stack:3}, {n_all:5} instructions; {kinds}; {wgmma_of(kernel)}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels.moe_grouped_sass")
    parser.add_argument("--sweep", action="store_true", help="also moe_prefill.py's SWEEP")
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args(argv)
    for block_m in (16, 64, 128):
        cfg = gg.block_config(block_m)
        for fmt in args.formats.split(","):
            for gate_up in (True, False):
                print(line(fmt, gate_up, cfg), flush=True)
    if args.sweep:
        from benchmarks.kernels.moe_prefill import SWEEP

        for cfg in SWEEP:
            for fmt, gate_up in (
                ("Q4_K", True),
                ("Q6_K", False),
                ("MXFP4", True),
                ("MXFP4", False),
            ):
                print(line(fmt, gate_up, cfg), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
