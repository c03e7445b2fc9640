"""Compile the expert GEMV for sm_90 on a machine without a GPU: registers, stack, instructions.

    python -m benchmarks.kernels.moe_sass [--sweep]

Each launch benchmarks/kernels/moe.py times (Qwen3-30B-A3B Q4_K_M, gpt-oss-20b MXFP4; one and
16 tokens), compiled as the default MoeGemvConfig launches it (the down from float h, as
expert_down launches it without `quantized`), the one-token downs (moe_down_dp4a.py's for
Q4_K and Q6_K, moe_one_token.py's where a row fits one split) that a decode step of one
sequence takes, the router's kernel for both
models' routers as norm_and_route launches it, and Qwen3-30B-A3B's routing chosen before the
FFN norm (router_scores, wo_and_scores), with Triton's bundled ptxas and cuobjdump. The cheap
check before a device run: that every format and mode compiles, and what it costs in
registers (programs an SM holds), spills, global loads (16-byte or narrower) and
instructions, and the issue floor those instructions set (issue_floor_us: every program's
instructions issued once at the H200's full rate).
--sweep: the same for each launch shape of the benchmark's SWEEP at one token.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from benchmarks.kernels.moe import CASES, Case
from kernels import moe_gemv, moe_one_token

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def _sass(kernel) -> tuple[str, str]:
    """(cuobjdump -res-usage, cuobjdump -sass) of a compiled kernel."""
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "moe_usage.cubin"
    path.write_bytes(kernel.asm["cubin"])
    out = subprocess.run([str(CUOBJDUMP), "-res-usage", str(path)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    sass = subprocess.run([str(CUOBJDUMP), "-sass", str(path)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    return out, sass


def usage(kernel) -> tuple[int, int, int]:
    """(registers, stack bytes, instructions) of a compiled kernel."""
    out, sass = _sass(kernel)
    n_all = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, flags=re.M))
    regs = int(re.search(r"REG:(\d+)", out).group(1))
    return regs, int(re.search(r"STACK:(\d+)", out).group(1)), n_all


def global_loads(kernel) -> tuple[int, int]:
    """(16-byte global loads, narrower ones) in a compiled kernel's SASS."""
    ops = re.findall(r"\b(LDG\.E[.A-Z0-9_]*)", _sass(kernel)[1])
    wide = sum(".128" in op for op in ops)
    return wide, len(ops) - wide


# what the issue floor assumes of an H200: SMs, warp-instructions an SM issues a cycle, clock
SMS, ISSUE, GHZ = 132, 4, 1.98


def issue_floor_us(case: Case, tokens: int, cfg: moe_gemv.MoeGemvConfig, splits: int,
                   instructions: int) -> tuple[int, float]:  # fmt: skip
    """(programs, µs) of a 1-token launch if the H200 issued every program's instructions once
    each at full rate: a floor, not a time (it counts the finish in every program; latency and
    memory are not in it). It is where the GEMVs stand
    against the copy rate: Qwen3-30B-A3B's 1-token gate+up reads 14 MB, 3.4 µs at 4.1 TB/s."""
    groups = min(case.n_expert, tokens * case.top_k)
    programs = triton.cdiv(case.n_out, cfg.block_n) * splits * groups
    warp_instructions = programs * cfg.num_warps * instructions
    return programs, warp_instructions / (SMS * ISSUE * GHZ * 1e3)


# the weight planes' pointer types, p0..p4 (moe_blocks.plane_args)
PLANES = {
    "Q4_K": ["*fp16", "*fp16", "*i32", "*i32", "*i32"],
    "Q5_K": ["*fp16", "*fp16", "*i32", "*i32", "*i32"],
    "Q6_K": ["*i32", "*i32", "*i8", "*fp16", "*fp16"],
    "Q8_0": ["*fp16", "*i32", "*fp16", "*fp16", "*fp16"],
    "MXFP4": ["*u8", "*i32", "*u8", "*u8", "*u8"],
    "Q4_0": ["*fp16", "*i32", "*fp16", "*fp16", "*fp16"],
    "Q4_1": ["*fp16", "*i32", "*fp16", "*fp16", "*fp16"],
    "Q5_0": ["*fp16", "*i32", "*fp16", "*i32", "*fp16"],
    "Q5_1": ["*fp16", "*i32", "*fp16", "*i32", "*fp16"],
}
POINTERS = {
    "x_ptr": "*i32", "xd_ptr": "*fp32", "xs_ptr": "*i32", "out_ptr": "*fp16",
    "part_ptr": "*fp32", "count_ptr": "*i32", "bias_a_ptr": "*fp32", "bias_b_ptr": "*fp32",
    "order_ptr": "*i32", "group_expert_ptr": "*i32", "group_start_ptr": "*i32",
    "group_count_ptr": "*i32", "n_groups_ptr": "*i32", "ids_ptr": "*i64", "weights_ptr": "*fp32",
}  # fmt: skip
MODES = {"rows": moe_gemv.ROWS, "gate_up": moe_gemv.GATE_UP, "down": moe_gemv.DOWN}


def compile_sm90(case: Case, tokens: int, config: moe_gemv.MoeGemvConfig | None = None):
    """The kernel as expert_gate_up / expert_down / expert_rows launch it for this case."""
    mode = MODES[case.kind]
    cfg = config or moe_gemv.default_config(case.fmt, mode, tokens == 1)
    nr = moe_gemv._runs_per_split(case.n_in // 16, cfg.max_runs)
    splits = triton.cdiv(case.n_in // 16, nr)
    consts = dict(
        FMT=moe_gemv.FORMAT_CODES[case.fmt], MODE=mode,
        ACT=1 if case.fmt == "MXFP4" else 0, HAS_BIAS=case.bias, X_PER_TOKEN=mode != 2,
        X_FLOAT=mode == moe_gemv.DOWN,
        SPLIT=splits > 1 or mode == moe_gemv.DOWN, N_SPLITS=splits, BLOCK_N=cfg.block_n,
        NG=nr // 2,
        P_PAD=triton.next_power_of_2(tokens * case.top_k), T_PAD=triton.next_power_of_2(tokens),
        K_PAD=triton.next_power_of_2(case.top_k), ASM=True, GDC=cfg.pdl, ONE_TOKEN=tokens == 1,
        EARLY_NEXT=cfg.early_next,
    )  # fmt: skip
    types = dict(POINTERS, alpha="fp32", limit="fp32")
    if consts["X_FLOAT"]:  # the down reads h (f16) and rounds it to 8 bits itself
        types["x_ptr"] = "*fp16"
    for i, t in enumerate(PLANES[case.fmt]):
        types[f"a{i}"] = types[f"b{i}"] = t
    fn = moe_gemv._expert_kernel
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    # pointers, N and K as Triton's launch specializes them (multiples of 16)
    aligned = [i for i, a in enumerate(fn.arg_names) if signature[a][0] == "*" or a in "NK"]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": cfg.num_warps, "num_stages": 1}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options), nr, splits


def compile_one_token_sm90(case: Case, cfg: moe_gemv.MoeGemvConfig | None = None):
    """moe_one_token.py's down as a one-token step launches it for this case (h in float), or
    None where the step takes the grouped kernel (gate/up, rows, a row in several splits)."""
    if case.kind != "down" or not moe_gemv.takes_one_token(1, case.top_k, case.n_in):
        return None
    cfg = cfg or moe_gemv.one_token_config()
    consts = dict(
        FMT=moe_gemv.FORMAT_CODES[case.fmt], HAS_BIAS=case.bias, X_FLOAT=True,
        BLOCK_N=cfg.block_n, NG=moe_one_token.first_chunk(case.n_in // 32),
        NG_REST=moe_one_token.rest_chunk(case.n_in // 32),
        S=triton.next_power_of_2(case.top_k), ASM=True, GDC=cfg.pdl,
    )  # fmt: skip
    types = dict(POINTERS, x_ptr="*fp16", bias_ptr="*fp32")
    for i, t in enumerate(PLANES[case.fmt]):
        types[f"p{i}"] = t
    fn = moe_one_token._one_token_down_kernel
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    aligned = [i for i, a in enumerate(fn.arg_names) if signature[a][0] == "*" or a in "NK"]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": cfg.num_warps, "num_stages": 1}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_dense_down_sm90(case: Case, cfg: moe_gemv.MoeGemvConfig | None = None):
    """moe_down_dp4a.py's down as a one-token step launches it for this case (h in 8 bits),
    or None where it does not take the case."""
    from kernels import moe_down_dp4a

    if case.kind != "down" or not moe_down_dp4a.takes(case.fmt, case.n_in):
        return None
    cfg = cfg or moe_gemv.dense_down_config()
    first, rest = moe_down_dp4a.split_blocks(case.top_k * case.n_in // 256)
    q6 = case.fmt == "Q6_K"
    consts = dict(BLOCK_N=cfg.block_n, NBLK=first, NBLK_REST=rest, Q6=q6, GDC=cfg.pdl, ASM=True)
    planes = ["*i32", "*i32", "*i32", "*fp16"] if q6 else ["*fp16", "*fp16", "*i32", "*i32"]
    types = dict(POINTERS, xq_ptr="*i32")
    types.update({f"p{i}": t for i, t in enumerate(planes)})
    fn = moe_down_dp4a._down_kernel
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    aligned = [i for i, a in enumerate(fn.arg_names) if signature[a][0] == "*" or a == "N"]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    options = {"num_warps": cfg.num_warps, "num_stages": 1}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def _dense_down_line(case: Case) -> str | None:
    kernel = compile_dense_down_sm90(case)
    if kernel is None:
        return None
    cfg = moe_gemv.dense_down_config()
    regs, stack, n_all = usage(kernel)
    programs = triton.cdiv(case.n_out, cfg.block_n)
    floor = programs * cfg.num_warps * n_all / (SMS * ISSUE * GHZ * 1e3)
    return (
        f"{case.name:26} {case.fmt:5}  1 token, dense down: {regs:3} regs, stack "
        f"{stack:3}, {n_all:5} instructions; {programs:5} programs x {cfg.num_warps} warps "
        f"({cfg.block_n} rows x {case.top_k} slots): issue floor {floor:5.1f} us"
    )


def _one_token_line(case: Case, cfg: moe_gemv.MoeGemvConfig | None = None) -> str | None:
    kernel = compile_one_token_sm90(case, cfg)
    if kernel is None:
        return None
    cfg = cfg or moe_gemv.one_token_config()
    regs, stack, n_all = usage(kernel)
    wide, narrow = global_loads(kernel)
    programs = triton.cdiv(case.n_out, cfg.block_n)
    floor = programs * cfg.num_warps * n_all / (SMS * ISSUE * GHZ * 1e3)
    return (f"{case.name:26} {case.fmt:5}  1 token, one-token down: {regs:3} regs, "
            f"stack {stack:3}, {n_all:5} instructions, LDG {wide:2} x 16 B + {narrow:2} "
            f"narrower; {programs:5} programs x {cfg.num_warps} warps ({cfg.block_n} rows x "
            f"{case.top_k} slots): issue floor {floor:5.1f} us")  # fmt: skip


def compile_router_sm90(n_expert: int, n_embd: int, top_k: int, tokens: int, bias: bool,
                        softmax_all: bool):  # fmt: skip
    """The router's kernel as norm_and_route launches it for this router (F32, the input,
    residual and y in f16; with gpt-oss's attention output bias where the router has a bias):
    the decode step's."""
    from kernels import moe_router, moe_routing

    cfg = moe_router.RouterConfig()
    sizes = moe_routing.select_sizes(tokens, n_expert, top_k, None)
    del sizes["RANK_CHUNK"]  # (_select_and_group_kernel's)
    consts = dict(
        BLOCK_E=cfg.block_e, SPLIT=cfg.split, N_SPLITS=triton.cdiv(n_embd, cfg.split), GDC=True,
        SOFTMAX_ALL=softmax_all, NORMALIZE=softmax_all, HAS_BIAS=bias, NORM=True,
        HAS_ATTN_BIAS=bias, BLOCK_N=triton.next_power_of_2(n_embd), **sizes,
    )  # fmt: skip
    types = {"x_ptr": "*fp16", "w_ptr": "*fp32", "bias_ptr": "*fp32", "part_ptr": "*fp32",
             "logits_ptr": "*fp32", "weights_ptr": "*fp32", "r_ptr": "*fp16", "ab_ptr": "*fp32",
             "nw_ptr": "*fp32", "y_ptr": "*fp16", "h_ptr": "*fp16", "xd_ptr": "*fp32",
             "eps": "fp32"}  # fmt: skip
    fn = moe_router._router_kernel
    signature = {
        a: "constexpr" if a in consts else types.get(a, "*i32" if a.endswith("_ptr") else "i32")
        for a in fn.arg_names
    }
    src = ASTSource(fn, signature, constexprs=consts)
    options = {"num_warps": cfg.num_warps, "num_stages": 1}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_beside_sm90(n_expert: int = 128, n_embd: int = 2048, n_in: int = 4096,
                        top_k: int = 8) -> dict:  # fmt: skip
    """The two launches of a one-token step's routing chosen before the FFN norm
    (kernels/router_beside_wo.py) as the engine launches them at Qwen3-30B-A3B's shape: the
    scores (router_scores) and wo's Q4_K GEMV with the picking program (wo_and_scores)."""
    from kernels import router_beside_wo as beside

    def compiled(fn, types: dict, consts: dict, warps: int, stages: int = 1):
        signature = {
            a: "constexpr" if a in consts
            else types.get(a, "*fp32" if a.endswith("_ptr") else "i32")
            for a in fn.arg_names
        }  # fmt: skip
        src = ASTSource(fn, signature, constexprs=consts)
        options = {"num_warps": warps, "num_stages": stages}
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)

    scores = compiled(
        beside._scores_kernel, {"rows_ptr": "*fp16", "xq_ptr": "*i32"},
        dict(BLOCK_E=beside.SCORES_ROWS, SPLIT=beside.SPLIT_COLUMNS, GDC=True), 2,
    )  # fmt: skip
    ints = ("xq_ptr", "xs_ptr", "count_ptr", "p2", "p3", "ids_ptr")
    wo = compiled(
        beside._wo_and_picks_kernel,
        {**{a: "*i32" for a in ints}, "p0": "*fp16", "p1": "*fp16"},
        dict(BLOCK_N=4, NBLK=16, EVEN=True, SPLIT_K=False, Q6=False, ONE_STEP=True, GDC=True,
             EARLY_NEXT=True, ASM=True, RIT=True,
             P_PAD=triton.next_power_of_2(triton.cdiv(n_embd + n_in, beside.SPLIT_COLUMNS)),
             K=top_k, E_PAD=triton.next_power_of_2(n_expert)),
        2, 3,
    )  # fmt: skip
    return {"router_scores": scores, "wo_and_picks": wo}


ROUTERS = [  # name, n_expert, n_embd, top_k, bias, softmax over all experts
    ("qwen3-30b-a3b router", 128, 2048, 8, False, True),
    ("gpt-oss-20b router", 32, 2880, 4, True, False),
]


def _line(case: Case, tokens: int, cfg: moe_gemv.MoeGemvConfig | None = None) -> str:
    cfg = cfg or moe_gemv.default_config(case.fmt, MODES[case.kind], tokens == 1)
    kernel, nr, splits = compile_sm90(case, tokens, cfg)
    regs, stack, n_all = usage(kernel)
    wide, narrow = global_loads(kernel)
    line = (f"{case.name:26} {case.fmt:5} {tokens:2} tokens: {splits} split(s) of {nr} runs, "
            f"{regs:3} regs, stack {stack:3}, {n_all:5} instructions, LDG {wide:2} x 16 B + "
            f"{narrow:2} narrower")  # fmt: skip
    if tokens == 1:  # (more tokens: the pair loop runs more, groups past the count return)
        programs, floor = issue_floor_us(case, tokens, cfg, splits, n_all)
        line += (f"; {programs:5} programs x {cfg.num_warps} warps ({cfg.block_n} rows): "
                 f"issue floor {floor:5.1f} us")  # fmt: skip
    return line


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels.moe_sass")
    parser.add_argument(
        "--sweep", action="store_true", help="also benchmarks/kernels/moe.py's SWEEP at 1 token"
    )
    args = parser.parse_args(argv)
    for case in CASES:
        for tokens in (1, 16):
            print(_line(case, tokens), flush=True)
        if case.kind == "gate_up":  # before moe_down_dp4a.py's down: the next launch let in early
            early = dataclasses.replace(moe_gemv.default_config(case.fmt, moe_gemv.GATE_UP, True),
                                        early_next=True)  # fmt: skip
            print(_line(case, 1, early) + ", early_next", flush=True)
        one = _one_token_line(case)
        if one:
            print(one, flush=True)
        dense = _dense_down_line(case)
        if dense:
            print(dense, flush=True)
    for name, n_expert, n_embd, top_k, bias, softmax_all in ROUTERS:
        for tokens in (1, 16):
            kernel = compile_router_sm90(n_expert, n_embd, top_k, tokens, bias, softmax_all)
            regs, stack, n_all = usage(kernel)
            print(f"{name:26} F32   {tokens:2} tokens: norm_and_route, {regs:3} regs, "
                  f"stack {stack:3}, {n_all:5} instructions", flush=True)  # fmt: skip
    for launch, kernel in compile_beside_sm90().items():
        regs, stack, n_all = usage(kernel)
        print(f"{'qwen3-30b-a3b router':26} F16    1 token : {launch}, {regs:3} regs, "
              f"stack {stack:3}, {n_all:5} instructions", flush=True)  # fmt: skip
    if args.sweep:
        from benchmarks.kernels.moe import SWEEP

        print("\nSWEEP's launch shapes at 1 token (block_n x max_runs, warps):")
        for case in CASES[:4]:
            for cfg in SWEEP:
                print(f"  {cfg.block_n:2}x{cfg.max_runs:3} w{cfg.num_warps} pdl{int(cfg.pdl)}  "
                      + _line(case, 1, cfg), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
