"""Compile the integer GEMV for a batch's rows for sm_90 on a machine without a GPU: the
program-per-row kernel (kernels/gemv_dp4a.py, as integer_config launches it at one row; B rows
issue B times its instructions) against every row in one program (kernels/gemv_dp4a_rows.py,
default_rows_config's tile), in instructions a weight a thread, at 1, 2, 4, 8 and 16 rows.

    PYTHONPATH=/tmp/t36:$PWD python -m benchmarks.kernels.gemv_rows_sass

The rows kernel is straight-line (one step a program), so its whole instruction count over a
program's weights a thread is the cost a weight; so is the one-row kernel's at 4096 inputs
(one step), and at 14336 (Q6_K's K loop) its loop body's over a step's weights. The H200
issues about 4.7 instructions a Q4_K weight and 6.8 a Q6_K weight in the time it streams one
at its copy rate (kernels/dequant_mma.py's docstring). Run it with the Triton the GPU has
(3.6 on the H200).
"""

from __future__ import annotations

import collections
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from benchmarks.kernels.dequant_mma_sass import assemble, loop_opcodes
from kernels.gemv import dp4a_plan, integer_config
from kernels.gemv_common import whole_steps
from kernels.gemv_dp4a import dp4a_gemv_kernel
from kernels.gemv_dp4a_rows import default_rows_config, dp4a_rows_kernel, rows_power

X_PTRS = {"xq_ptr": "*i32", "xd_ptr": "*fp32", "xs_ptr": "*i32", "out_ptr": "*fp16",
          "part_ptr": "*fp32", "count_ptr": "*i32"}  # fmt: skip
PLANES = {"Q4_K": ("*fp16", "*fp16", "*i32", "*i32"), "Q6_K": ("*i32", "*i32", "*i32", "*fp16")}
SHAPES = [("Q4_K", 4096, 4096), ("Q6_K", 4096, 4096), ("Q6_K", 4096, 14336)]


def _compile(fn, fmt, consts, ints, num_warps, num_stages):
    types = {**X_PTRS, **dict(zip(["p0", "p1", "p2", "p3"], PLANES[fmt], strict=True))}
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    aligned = [i for i, a in enumerate(fn.arg_names)
               if signature[a][0] == "*" or (a in ints and ints[a] % 16 == 0)]  # fmt: skip
    src = ASTSource(fn, signature,
                    constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                    attrs={(i,): [["tt.divisibility", 16]] for i in aligned})  # fmt: skip
    options = {"num_warps": num_warps, "num_stages": num_stages}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def counts(kernel, loop: bool = False) -> tuple[int, int, collections.Counter]:
    """(registers, spill-store bytes, opcode counts of the whole kernel, or with `loop` of its
    main loop's body)."""
    info, sass = assemble(kernel)
    ops = collections.Counter()
    if loop:
        ops = loop_opcodes(sass)
        ops.pop("NOP", None)
    for line in sass.splitlines() if not loop else ():
        found = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if found and found.group(1) != "NOP":
            ops[found.group(1)] += 1
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    return regs, int(re.search(r"(\d+) bytes spill stores", info).group(1)), ops


def per_row_kernel(fmt, n_out, n_in):
    """The program-per-row kernel at one row: (weights a thread, its counts)."""
    cfg, plan = dp4a_plan(integer_config(fmt), n_out, n_in, 1, 132, True)
    consts = {"BLOCK_N": cfg.block_n, "NBLK": cfg.blocks_per_tile, "EVEN": plan.even,
              "SPLIT_K": plan.splits > 1, "Q6": fmt == "Q6_K",
              "ONE_STEP": plan.blocks_per_split <= cfg.blocks_per_tile, "GDC": True,
              "EARLY_NEXT": True, "ASM": True, "RIT": cfg.rows_in_thread}  # fmt: skip
    ints = {"N": n_out, "NB": n_in // 256, "n_rows_x": 1, "stride_ob": n_out,
            "blocks_per_split": plan.blocks_per_split, "n_splits": plan.splits}  # fmt: skip
    kernel = _compile(dp4a_gemv_kernel, fmt, consts, ints, cfg.num_warps, cfg.num_stages)
    weights = cfg.block_n * cfg.blocks_per_tile * 256 / (32 * cfg.num_warps)
    return weights, counts(kernel, loop=not consts["ONE_STEP"])


def rows_kernel(fmt, n_out, n_in, rows):
    """The rows kernel at `rows` rows: (weights a thread, its counts)."""
    cfg = default_rows_config(fmt, rows, n_out, n_in)
    nb = n_in // 256
    nblk = whole_steps(nb, cfg.blocks_per_step)
    splits = triton.cdiv(nb, nblk)
    consts = {"ROWS": rows_power(rows), "BLOCK_N": cfg.block_n, "NBLK": nblk, "EVEN": True,
              "SPLIT_K": splits > 1, "Q6": fmt == "Q6_K", "GDC": True, "ASM": True,
              "RIT": cfg.rows_in_thread}  # fmt: skip
    ints = {"N": n_out, "NB": nb, "n_rows_x": rows, "stride_ob": n_out, "n_splits": splits}
    kernel = _compile(dp4a_rows_kernel, fmt, consts, ints, cfg.num_warps, 1)
    return cfg.block_n * nblk * 256 / (32 * cfg.num_warps), counts(kernel)


def main() -> int:
    for fmt, n_out, n_in in SHAPES:
        weights, (regs, spills, ops) = per_row_kernel(fmt, n_out, n_in)
        one = sum(ops.values()) / weights
        print(
            f"{fmt} {n_out}x{n_in} program per row: {regs} regs, spills {spills}, "
            f"{one:5.2f} instructions a weight a row (B rows: {one:.2f} B)",
            flush=True,
        )
        for rows in (1, 2, 4, 8, 16):
            weights, (regs, spills, ops) = rows_kernel(fmt, n_out, n_in, rows)
            total = sum(ops.values()) / weights
            top = ", ".join(f"{op} {n}" for op, n in ops.most_common(6))
            print(f"  rows in one program, {rows:2} rows: {regs:3} regs, spills {spills}, "
                  f"{total:5.2f} a weight ({total / rows:4.2f} a row; program per row "
                  f"{one * rows:5.2f}) ({top})", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
