"""Compile the dequantizing MMA (kernels/dequant_mma.py) for sm_90 on a machine without a GPU:
registers, spills, and the SASS instructions of its main loop a weight a thread.

    python -m benchmarks.kernels.dequant_mma_sass

Each Q4_K / Q6_K launch benchmarks/kernels/dequant_mma.py times at 16 and 64 rows (Llama-3-8B's
attn_q/o and ffn_down), as default_config launches it, with the inline assembly and without
(asm=False). The loop is the longest backward branch of the SASS; it walks one super-block of
BLOCK_N rows, so its instructions over BLOCK_N x 256 / threads are the instructions a weight
costs each thread. Against the H200's budget at the copy rate (decision 0022's follow-up: 4.7
a Q4_K weight, 6.8 a Q6_K weight) this says whether the kernel can be memory-bound at all.
"serialized": ptxas's C7515 note, each wgmma waited for before the next is issued (a
non-wgmma instruction writing the accumulator's registers inside their pipeline stage).
Run it with the Triton the GPU has (3.6 on the H200: PYTHONPATH=/tmp/t36 after
`pip install --no-deps --target /tmp/t36 triton==3.6.0`); 3.8 compiles these loops otherwise.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels.dequant_mma import DequantMmaConfig, default_config, dequant_mma_kernel
from kernels.split_k import split_plan

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
# the planes as dequant_mma.plane_args passes them (p0..p2 after d and dmin); x in f16
PLANES = {"Q4_K": ("*i32", "*u8", "*u8"), "Q6_K": ("*u8", "*u8", "*i32")}
POINTERS = {"x_ptr": "*fp16", "out_ptr": "*fp16", "part_ptr": "*fp32", "count_ptr": "*i32",
            "pd": "*fp16", "pdmin": "*fp16"}  # fmt: skip
SHAPES = {"Q4_K": (4096, 4096), "Q6_K": (4096, 14336)}  # (n_out, n_in)


def compile_sm90(fmt: str, rows: int, cfg: DequantMmaConfig):
    """The kernel as dequant_mma launches it for `rows` rows of x on SHAPES[fmt]."""
    n_out, n_in = SHAPES[fmt]
    consts = {"Q6": fmt == "Q6_K", "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
              "SPLIT_K": cfg.split_k > 1, "ASM": cfg.asm}  # fmt: skip
    per_split, splits = split_plan(n_in // 256, cfg.split_k)
    # the integers as a launch passes them: Triton specializes those divisible by 16
    ints = {"M": rows, "N": n_out, "K": n_in, "NB": n_in // 256, "stride_om": n_out,
            "blocks_per_split": per_split, "n_splits": splits}  # fmt: skip
    fn = dequant_mma_kernel
    types = {**POINTERS, **dict(zip(["p0", "p1", "p2"], PLANES[fmt], strict=True))}
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    aligned = [i for i, a in enumerate(fn.arg_names)
               if signature[a][0] == "*" or ints.get(a, 1) % 16 == 0]  # fmt: skip
    src = ASTSource(fn, signature,
                    constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                    attrs={(i,): [["tt.divisibility", 16]] for i in aligned})  # fmt: skip
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def loop_opcodes(sass: str) -> collections.Counter:
    """Opcode counts of the longest backward branch's body (the kernel's main loop)."""
    body = []
    for line in sass.splitlines():
        found = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*)", line)
        if found:
            body.append((int(found.group(1), 16), found.group(2)))
    start = {address: i for i, (address, _) in enumerate(body)}
    longest = (0, -1)
    for i, (address, text) in enumerate(body):
        branch = re.search(r"BRA\s+0x([0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address:
            first = start[int(branch.group(1), 16)]
            if i - first > longest[1] - longest[0]:
                longest = (first, i)
    ops = collections.Counter()
    for _, text in body[longest[0] : longest[1] + 1]:
        op = re.match(r"(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", text)
        if op:
            ops[op.group(1)] += 1
    return ops


def assemble(kernel) -> tuple[str, str]:
    """(ptxas's -v report, the SASS listing) of a compiled kernel's PTX for sm_90a."""
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "k.ptx"
        ptx.write_text(kernel.asm["ptx"])
        cubin = Path(tmp) / "k.cubin"
        command = [str(BIN / "ptxas"), "-arch=sm_90a", "-v", str(ptx), "-o", str(cubin)]
        info = subprocess.run(command, capture_output=True, text=True, check=True).stderr
        sass = subprocess.run([str(BIN / "cuobjdump"), "-sass", str(cubin)],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    return info, sass


def usage(kernel) -> tuple[int, int, collections.Counter, bool]:
    """(registers, spill-store bytes, the main loop's opcode counts, whether ptxas serialized
    the wgmmas: its C7515 note) of a compiled kernel."""
    info, sass = assemble(kernel)
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    spills = int(re.search(r"(\d+) bytes spill stores", info).group(1))
    return regs, spills, loop_opcodes(sass), "C7515" in info


def main() -> int:
    for fmt, (n_out, n_in) in SHAPES.items():
        for rows in (16, 64):
            for asm in (True, False):
                cfg = dataclasses.replace(default_config(rows, n_out, n_in), asm=asm)
                regs, spills, ops, serial = usage(compile_sm90(fmt, rows, cfg))
                per_thread = cfg.block_n * 256 / (32 * cfg.num_warps)  # weights an iteration
                top = ", ".join(f"{op} {n}" for op, n in ops.most_common(6))
                print(f"{fmt} {rows:2} rows {'asm  ' if asm else 'plain'} bn{cfg.block_n} "
                      f"w{cfg.num_warps} s{cfg.num_stages} k{cfg.split_k}: {regs:3} regs, "
                      f"spills {spills}, {'serialized' if serial else 'pipelined'} wgmma, "
                      f"loop {sum(ops.values()):4} instructions = "
                      f"{sum(ops.values()) / per_thread:5.2f} a weight ({top})",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
