"""Compile the decode attention for sm_90 on a machine without a GPU and count its SASS.

    python -m benchmarks.kernels.attention_sass [--dump DIR] [--formats f16/f16 rot4/rot4 ...]
        [--rotate-q-once] [--sum-after-loop] [--max-registers N]

Prints, per K/V format pair and unpacking of rot4 and q8 codes, registers, spills and the SASS
instructions of one page step (the page loop's body: 64 positions of one KV head, per
thread), for Llama-3-8B's shape (4 query heads per KV head of 128, one token), with the
block-wide barriers (BAR) and warp shuffles (SHFL) in it; and the instructions, barriers and
shuffles before the loop (every program's fixed cost: q's load and, for rotated K, its
rotation, the page range, the pipeline's first loads). --rotate-q-once compiles the split
kernel as AttentionTuning(rotate_q_once=True) launches it (q prepared by its own kernel,
whose SASS is counted too); --sum-after-loop as AttentionTuning(sum_after_loop=True) (the
softmax's row sums reduced after the loop). Compiled as an H100 launches them
(overlap_reduce: the griddepcontrol calls in). The cheap
check before a device run: rot4 reads 3.2x fewer bytes than f16, so its page step must not
cost much more issue time (gemv_sass.py does the same for the GEMV).

Also, per launch shape (--warps, --stages): the shared memory, the programs an H100 SM holds
(kernels/occupancy.py), and the page loop's wait: the count of load groups the loop's
`DEPBAR.LE SB0, n` lets stay in flight while it computes. 0 means each step waits for every
load it has issued, the one of the next page included: no load overlaps compute.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from benchmarks.kernels.gemv_sass import CUOBJDUMP, loop_instructions
from kernels.decode_attention import decode_split_kernel, prepare_queries_kernel
from kernels.decode_launch import PREPARE_ROWS, AttentionTuning, fused_reduce_consts
from kernels.kv_tiles import FORMAT_CODES
from kernels.occupancy import SmLimits, programs_per_sm

POINTER_TYPES = {
    "q_ptr": "*fp16", "acc_ptr": "*fp32", "m_ptr": "*fp32", "l_ptr": "*fp32",
    "out_ptr": "*fp16", "count_ptr": "*i32",
    "block_table_ptr": "*i32", "lengths_ptr": "*i32", "positions_ptr": "*i32",
    "signs_ptr": "*fp32", "open_page_ptr": "*i32", "open_slots_ptr": "*i32",
}  # fmt: skip
PLANE_TYPES = {"f16": "*fp16", "q8": "*i8", "rot4": "*u8", "rot2": "*u8", "kivi4": "*u8"}


def compile_sm90(k_fmt: str, v_fmt: str, unpack: str, warps: int = 4, stages: int = 5,
                 q_ready: bool = False, sum_after_loop: bool = False,
                 max_registers: int = 0, fused_reduce: bool = False,
                 flat_v: bool = False, extra: dict | None = None):  # fmt: skip
    """The split kernel for one format pair and rot4 unpacking path ("words" or "bytes", as
    AttentionTuning.code_unpack), with its inline assembly, for sm_90; q_ready: reading q
    from prepare_queries_kernel (AttentionTuning.rotate_q_once, rotated K); sum_after_loop:
    AttentionTuning.sum_after_loop; max_registers: AttentionTuning.max_registers;
    fused_reduce: AttentionTuning.fused_reduce (the merge in the last program of a head);
    flat_v: AttentionTuning.flat_v (rot4 V's tile built 2-D); extra: other compile-time
    arguments by name (e.g. MASK_TAIL=True)."""
    fn = decode_split_kernel
    consts = dict(HQ=32, HKV=8, G=4, T=1, G_PAD=16, D=128, LOG2D=7, P=64,
                  K_FMT=FORMAT_CODES[k_fmt], V_FMT=FORMAT_CODES[v_fmt], POSITIONS=False,
                  CODE_WORDS=unpack == "words", ASM=True, KG=32, LAUNCH_DEPENDENTS=True,
                  Q_READY=q_ready, WAIT_Q=q_ready, SUM_AFTER_LOOP=sum_after_loop,
                  FLAT_V=flat_v, **(extra or {}))  # fmt: skip
    consts.update(fused_reduce_consts(AttentionTuning(fused_reduce=fused_reduce), 4, 128, warps))
    for param in fn.params:  # the other compile-time flags at their defaults
        if param.is_constexpr and param.name not in consts:
            consts[param.name] = param.default
    signature = {}
    for arg in fn.arg_names:
        if arg in consts:
            signature[arg] = "constexpr"
        elif arg in POINTER_TYPES:
            signature[arg] = POINTER_TYPES[arg]
        elif arg.endswith("_ptr"):
            fmt = k_fmt if arg.startswith("k") else v_fmt
            signature[arg] = PLANE_TYPES[fmt] if arg[1] == "q" else "*fp16"
        elif arg == "qk_scale":
            signature[arg] = "fp32"
        else:
            signature[arg] = "i32"
    aligned = [(i,) for i, a in enumerate(fn.arg_names) if a.endswith("_ptr")]
    attrs = {k: [["tt.divisibility", 16]] for k in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": warps, "num_stages": stages}
    if max_registers:
        options["maxnreg"] = max_registers
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_prepare_sm90(k_fmt: str):
    """prepare_queries_kernel as launch_decode launches it for this K format, for sm_90."""
    consts = dict(ROWS=PREPARE_ROWS, D=128, LOG2D=7, HALVES=k_fmt == "rot4",
                  LAUNCH_DEPENDENTS=True)  # fmt: skip
    types = {"q_ptr": "*fp16", "out_ptr": "*fp16", "signs_ptr": "*fp32", "qk_scale": "fp32"}
    fn = prepare_queries_kernel
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if a in types}
    attrs.pop((fn.arg_names.index("qk_scale"),))
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1})


def sass_of(kernel) -> tuple[str, str]:
    """The SASS listing and the resource usage line of a compiled kernel."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "kernel.cubin")
        path.write_bytes(kernel.asm["cubin"])
        run = [str(CUOBJDUMP), "-sass", str(path)]
        sass = subprocess.run(run, capture_output=True, text=True, check=True).stdout
        run = [str(CUOBJDUMP), "-res-usage", str(path)]
        usage = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    return sass, usage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump", help="write each SASS listing here")
    parser.add_argument("--formats", nargs="+", default=["f16/f16", "rot4/rot4"])
    parser.add_argument("--unpack", nargs="+", default=["bytes", "words"],
                        help="rot4/q8 unpacking paths (AttentionTuning.code_unpack)")  # fmt: skip
    parser.add_argument("--warps", type=int, default=4, help="AttentionTuning.num_warps")
    parser.add_argument("--stages", type=int, default=5, help="AttentionTuning.num_stages")
    parser.add_argument("--rotate-q-once", action="store_true",
                        help="AttentionTuning.rotate_q_once (rot4 and rot2 K)")  # fmt: skip
    parser.add_argument("--sum-after-loop", action="store_true",
                        help="AttentionTuning.sum_after_loop")  # fmt: skip
    parser.add_argument("--flat-v", action="store_true",
                        help="AttentionTuning.flat_v (rot4 V's tile built 2-D)")  # fmt: skip
    parser.add_argument("--fused-reduce", action="store_true",
                        help="AttentionTuning.fused_reduce (one launch)")  # fmt: skip
    parser.add_argument("--max-registers", type=int, default=0,
                        help="AttentionTuning.max_registers (0: compiler's choice)")  # fmt: skip
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=0|1",
                        help="other compile-time flags, e.g. MASK_TAIL=1 FOLD_HIGH=1")  # fmt: skip
    args = parser.parse_args()
    extra = {name: bool(int(value)) for name, value in (f.split("=") for f in args.set)}
    for k_fmt in sorted({p.split("/")[0] for p in args.formats} & {"rot4", "rot2"}):
        if args.rotate_q_once:
            sass, usage = sass_of(compile_prepare_sm90(k_fmt))
            lines = instruction_lines(sass)
            regs = re.search(r"REG:(\d+)", usage).group(1)
            print(f"prepare_queries_kernel for {k_fmt} K: {len(lines)} instructions, "
                  f"BAR {count_ops(lines, 'BAR')}, SHFL {count_ops(lines, 'SHFL')}, "
                  f"{regs} regs")  # fmt: skip
    for pair in args.formats:
        k_fmt, v_fmt = pair.split("/")
        # the formats whose unpacking AttentionTuning.code_unpack chooses
        coded = {"rot4", "q8", "kivi4"} & {k_fmt, v_fmt}
        for unpack in args.unpack if coded else ["-"]:
            q_ready = args.rotate_q_once and k_fmt in ("rot4", "rot2")
            kernel = compile_sm90(k_fmt, v_fmt, unpack, warps=args.warps, stages=args.stages,
                                  q_ready=q_ready, sum_after_loop=args.sum_after_loop,
                                  max_registers=args.max_registers,
                                  fused_reduce=args.fused_reduce,
                                  flat_v=args.flat_v, extra=extra)  # fmt: skip
            sass, usage = sass_of(kernel)
            if args.dump:
                Path(args.dump, f"{k_fmt}-{v_fmt}-{unpack}.sass").write_text(sass)
            regs = re.search(r"REG:(\d+)", usage).group(1)
            stack = re.search(r"STACK:(\d+)", usage).group(1)
            body = sass_loop_body(sass)
            ops = {}
            for line in body:
                op = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
                if op:
                    ops[op.group(1).split(".")[0]] = ops.get(op.group(1).split(".")[0], 0) + 1
            top = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:8])
            shared = kernel.metadata.shared
            fit = programs_per_sm(int(regs), args.warps, shared, SmLimits())
            before = sass_prologue(sass)
            after = sass_epilogue(sass)
            print(f"{pair:10} unpack {unpack:5}: {regs} regs, stack {stack}, page step "
                  f"{loop_instructions(sass)} instructions ({top}), BAR "
                  f"{count_ops(body, 'BAR')}, SHFL {count_ops(body, 'SHFL')}; before the loop "
                  f"{len(before)} instructions, BAR {count_ops(before, 'BAR')}, SHFL "
                  f"{count_ops(before, 'SHFL')}; after it {len(after)} instructions, BAR "
                  f"{count_ops(after, 'BAR')}; {shared} B shared, "
                  f"{fit} programs an SM, loop wait {loop_wait(body)}")  # fmt: skip


def loop_wait(body: list[str]) -> int | None:
    """The load groups the loop leaves in flight at its wait (DEPBAR.LE SB0, n), if it waits."""
    for line in body:
        wait = re.search(r"DEPBAR\.LE SB0, (0x[0-9a-f]+)", line)
        if wait:
            return int(wait.group(1), 16)
    return None


def instruction_lines(sass: str) -> list[str]:
    """The listing's instruction lines (those that start with an address)."""
    return [ln for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]


def count_ops(lines: list[str], opcode: str) -> int:
    """Instructions of this opcode (any modifiers, predicated or not): BAR, SHFL, ..."""
    pattern = re.compile(r"\*/\s+(?:@!?U?P\w+\s+)?" + opcode + r"\b")
    return sum(1 for line in lines if pattern.search(line))


def sass_prologue(sass: str) -> list[str]:
    """The instructions before the page loop (the longest backward-branch loop)."""
    lines = instruction_lines(sass)
    body = sass_loop_body(sass)
    return lines[: lines.index(body[0])] if body else lines


def sass_epilogue(sass: str) -> list[str]:
    """The instructions after the page loop (the partials' stores; with the fused reduce, the
    ticket and the merge too)."""
    lines = instruction_lines(sass)
    body = sass_loop_body(sass)
    return lines[lines.index(body[-1]) + 1 :] if body else []


def sass_loop_body(sass: str) -> list[str]:
    """The instructions of the longest backward-branch loop (the page loop)."""
    lines = instruction_lines(sass)
    best: list[str] = []
    for i, ln in enumerate(lines):
        target = re.search(r"BRA\s+0x([0-9a-f]+)", ln)
        addr = int(re.match(r"\s+/\*([0-9a-f]+)\*/", ln).group(1), 16)
        if target and int(target.group(1), 16) < addr:
            start = int(target.group(1), 16)
            body = [x for x in lines[: i + 1]
                    if int(re.match(r"\s+/\*([0-9a-f]+)\*/", x).group(1), 16) >= start]  # fmt: skip
            if len(body) > len(best):
                best = body
    return best


if __name__ == "__main__":
    main()
