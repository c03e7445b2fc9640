"""Compile the integer GEMV for sm_90 on a machine without a GPU and count its SASS.

    python -m benchmarks.kernels.gemv_sass [--dump DIR]

Prints, per kernel and tile, registers, spills and the SASS instructions of the K loop per
weight (the loop's instruction count over the weights one iteration covers per thread). A
4.5-bit GEMV at the H100's ~3 TB/s leaves about 5.6 thread-instructions per weight (132 SMs x
4 schedulers x 1.75 GHz x 32 lanes over 5.3e12 weights/s); this is the cheap check before a
device run. Needs triton with its bundled ptxas and cuobjdump (no GPU, no CUDA driver).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels import gemv_dp4a
from kernels.occupancy import SmLimits, programs_per_sm

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
# dp4a_gemv_kernel's pointers: x, xq, xd, xs, out, part, count, then the planes p0..p3
POINTERS = {
    "q4_k": ["*fp16", "*i32", "*fp32", "*i32", "*fp16", "*fp32", "*i32", "*fp16", "*fp16", "*i32",
             "*i32"],
    "q6_k": ["*fp16", "*i32", "*fp32", "*i32", "*fp16", "*fp32", "*i32", "*i32", "*i32", "*i32",
             "*fp16"],
}  # fmt: skip
POINTER_ARGS = ("x_ptr", "xq_ptr", "xd_ptr", "xs_ptr", "out_ptr", "part_ptr", "count_ptr", "p0",
                "p1", "p2", "p3")  # fmt: skip


def compile_sm90(name: str, block_n: int, nblk: int, preq: bool, warps: int, stages: int,
                 split_k: bool = True, pipe: bool = False, one_step: bool = False,
                 early_next: bool = False, even: bool = True, prefetch: bool | None = None,
                 rit: bool = False, maxnreg: int = 0, scales_early: bool = False,
                 l2_ahead: int = 0):  # fmt: skip
    """name: q4_k or q6_k; pipe: PREFETCH (unless prefetch=False) and GDC (a programmatic
    dependent launch); rit: RIT (GemvConfig.rows_in_thread); maxnreg: a register cap."""
    fn = gemv_dp4a.dp4a_gemv_kernel
    consts = dict(BLOCK_N=block_n, NBLK=nblk, EVEN=even, SPLIT_K=split_k, PREQ=preq,
                  Q6=name == "q6_k", ONE_STEP=one_step,
                  PREFETCH=pipe if prefetch is None else pipe and prefetch, GDC=pipe,
                  EARLY_NEXT=early_next, ASM=True, RIT=rit,
                  SCALES_EARLY=scales_early, L2_AHEAD=l2_ahead,
                  WARPS=warps)  # fmt: skip
    signature = {}
    pointers = iter(POINTERS[name])
    for arg in fn.arg_names:
        if arg in consts:
            signature[arg] = "constexpr"
        elif arg in POINTER_ARGS:
            signature[arg] = next(pointers)
        else:
            signature[arg] = "i32"
    aligned = [(i,) for i, a in enumerate(fn.arg_names) if a in POINTER_ARGS or a == "N"]
    attrs = {k: [["tt.divisibility", 16]] for k in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": warps, "num_stages": stages, "launch_pdl": pipe}
    if maxnreg:
        options["maxnreg"] = maxnreg
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_mixed_sm90(warps: int = 2, even: bool = True, b_rows: int = 2, b_rit: bool = True):
    """kernels/gemv_mixed.py's kernel (Q4_K and Q6_K rows in one launch) for sm_90."""
    from kernels import gemv_mixed

    fn = gemv_mixed.mixed_gemv_kernel
    consts = dict(BLOCK_A=gemv_mixed.BLOCK_A, BLOCK_B=b_rows, NBLK=gemv_mixed.NBLK, EVEN_A=even,
                  EVEN_B=even, RIT_B=b_rit, GDC=True, ASM=True)  # fmt: skip
    pointers = iter(["*i32", "*fp32", "*i32", "*fp16", "*fp16", "*fp16", "*i32", "*i32", "*i32",
                     "*i32", "*i32", "*fp16"])  # fmt: skip
    signature, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in consts:
            signature[arg] = "constexpr"
        elif arg in ("N_A", "N_B", "NB", "tiles_a"):
            signature[arg] = "i32"
        else:
            signature[arg] = next(pointers)
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": warps, "num_stages": 3, "launch_pdl": True}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def session9() -> None:
    """Session 9's candidates compiled for sm_90: the defaults with L2 prefetch, and the mixed
    Q4_K + Q6_K launch: registers, stack, instructions."""
    for name, rit in (("q4_k", True), ("q6_k", False)):
        for l2 in (0, 2, 4):
            kernel = compile_sm90(name, 4, 16, True, 2, 3, split_k=False, pipe=True,
                                  one_step=True, early_next=True, rit=rit, l2_ahead=l2)  # fmt: skip
            regs, stack, n_all = usage(kernel)
            print(f"{name} 4x16 w2 one step l2_ahead={l2}: {regs} regs, stack {stack}, "
                  f"{n_all} instructions", flush=True)  # fmt: skip
    for name, nblk in (("q4_k", 8), ("q6_k", 16)):
        for l2 in (0, 2):
            kernel = compile_sm90(name, 4, nblk, True, 4, 3, split_k=False, pipe=True,
                                  early_next=True, prefetch=False, l2_ahead=l2)  # fmt: skip
            regs, stack, n_all = usage(kernel)
            print(f"{name} loop 4x{nblk} pdl (long rows) l2_ahead={l2}: {regs} regs, stack "
                  f"{stack}, {n_all} instructions", flush=True)  # fmt: skip
    for b_rows, b_rit in ((4, False), (4, True), (2, False), (2, True)):
        regs, stack, n_all = usage(compile_mixed_sm90(b_rows=b_rows, b_rit=b_rit))
        print(f"mixed Q4_K rit 4x16 + Q6_K {'rit ' if b_rit else ''}{b_rows}x16, 2 warps: "
              f"{regs} regs, stack {stack}, {n_all} instructions", flush=True)  # fmt: skip


def loop_instructions(sass: str) -> int:
    """Instructions of the longest backward-branch loop (the K loop)."""
    lines = [ln for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]
    addr = [int(re.match(r"\s+/\*([0-9a-f]+)\*/", ln).group(1), 16) for ln in lines]
    best = 0
    for ln, a in zip(lines, addr, strict=True):
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", ln)
        target = re.search(r"BRA\s+0x([0-9a-f]+)", ln)
        if m and target and int(target.group(1), 16) < a:
            best = max(best, (a - int(target.group(1), 16)) // 16 + 1)
    return best


def usage(kernel) -> tuple[int, int, int]:
    """(registers, stack bytes, instructions) of a compiled kernel."""
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "gemv_usage.cubin"
    path.write_bytes(kernel.asm["cubin"])
    out = subprocess.run([str(CUOBJDUMP), "-res-usage", str(path)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    sass = subprocess.run([str(CUOBJDUMP), "-sass", str(path)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    n_all = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, flags=re.M))
    regs = int(re.search(r"REG:(\d+)", out).group(1))
    return regs, int(re.search(r"STACK:(\d+)", out).group(1)), n_all


def session8() -> None:
    """Each candidate of benchmarks/kernels/gemv_sweep.py and the default, compiled as the
    4096- and 14336-wide rows launch it (gemv.dp4a_plan, 132 SMs): registers, stack (spilled
    bytes), instructions, and how many 4-warp-equivalent programs an SM holds by registers."""
    from benchmarks.kernels.gemv_sweep import CANDIDATES, applies
    from kernels.gemv import default_config, dp4a_plan

    for fmt in ("Q4_K", "Q6_K"):
        for n_out, n_in in ((4096, 4096), (4096, 14336)):
            named = [("default", default_config(fmt, 1))]
            named += [(c.name, c.config) for c in CANDIDATES if applies(c, fmt, n_in)]
            for label, config in named:
                cfg, plan = dp4a_plan(config, n_out, n_in, 1, 132, True)
                n_tiles = triton.cdiv(n_out, cfg.block_n) * plan.splits
                kernel = compile_sm90(
                    fmt.lower(), cfg.block_n, cfg.blocks_per_tile, cfg.prequantize,
                    cfg.num_warps, cfg.num_stages, split_k=plan.splits > 1, pipe=cfg.pipelined,
                    one_step=plan.blocks_per_split <= cfg.blocks_per_tile,
                    early_next=cfg.early_next, even=plan.even, prefetch=cfg.prefetch,
                    rit=cfg.rows_in_thread, maxnreg=cfg.max_registers,
                    scales_early=cfg.scales_early,
                )  # fmt: skip
                regs, stack, n_all = usage(kernel)
                programs = programs_per_sm(regs, cfg.num_warps, kernel.metadata.shared, SmLimits())
                tile_kb = cfg.block_n * cfg.blocks_per_tile * (144 if fmt == "Q4_K" else 210)
                print(f"{fmt} {n_out}x{n_in:<6} {label:20} {regs:3} regs, stack {stack:3}, "
                      f"{n_all:4} instructions, {programs:2} programs/SM of {cfg.num_warps} "
                      f"warps ({programs * tile_kb / 1024:.0f} KiB of weights), "
                      f"{n_tiles} programs", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump", help="write each SASS listing here")
    parser.add_argument("--session8", action="store_true", help="the sweep's candidates only")
    parser.add_argument("--session9", action="store_true", help="L2 prefetch, mixed launch")
    args = parser.parse_args()
    if args.session8:
        session8()
        return
    if args.session9:
        session9()
        return
    configs = []
    for name in ("q4_k", "q6_k"):
        for block_n, nblk, preq in ((16, 2, False), (16, 2, True), (4, 16, True), (8, 8, True)):
            for pipe in (False, True):
                configs.append((name, block_n, nblk, preq, 4, 3, pipe))
    # a 4096-wide row (16 super-blocks) is one step at NBLK=16: ONE_STEP, no loop
    configs += [(name, 4, 16, True, 4, 3, "one step") for name in ("q4_k", "q6_k")]
    for name, block_n, nblk, preq, warps, stages, pipe in configs:
        kernel = compile_sm90(name, block_n, nblk, preq, warps, stages, pipe=bool(pipe),
                              one_step=pipe == "one step")  # fmt: skip
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"gemv_{name}.cubin"
        path.write_bytes(kernel.asm["cubin"])
        sass = subprocess.run([str(CUOBJDUMP), "-sass", str(path)], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        if args.dump:
            pipe_tag = str(pipe).replace(" ", "_")
            tag = f"{name}_n{block_n}_k{nblk}_p{int(preq)}_w{warps}_pipe{pipe_tag}"
            Path(args.dump, f"{tag}.sass").write_text(sass)
        usage = subprocess.run([str(CUOBJDUMP), "-res-usage", str(path)], capture_output=True,
                               text=True, check=True).stdout  # fmt: skip
        regs = re.search(r"REG:(\d+)", usage).group(1)
        stack = re.search(r"STACK:(\d+)", usage).group(1)
        n_loop = loop_instructions(sass)
        weights = block_n * nblk * 256 / (warps * 32)  # per thread per iteration
        n_all = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, flags=re.M))
        gdc = "griddepcontrol" in kernel.asm["ptx"]
        print(f"{name} BLOCK_N={block_n:2} NBLK={nblk:2} PREQ={preq:d} PIPE={pipe!s:8}: "
              f"{regs} regs, stack {stack}, instructions: loop {n_loop / weights:.2f}, whole "
              f"{n_all / weights:.2f} per weight{' (griddepcontrol)' if gdc else ''}")  # fmt: skip


if __name__ == "__main__":
    main()
