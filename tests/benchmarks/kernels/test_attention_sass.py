"""benchmarks/kernels/attention_sass.py: the decode attention compiled for sm_90 without a GPU."""

from __future__ import annotations

import os
import re

import pytest

pytest.importorskip("triton", reason="compiling the kernels needs triton")

from benchmarks.kernels import attention_sass

NEEDS_COMPILER = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") == "1" or not attention_sass.CUOBJDUMP.exists(),
    reason="needs triton's compiler (not its interpreter) and its bundled cuobjdump",
)


def _loop(k_fmt: str, v_fmt: str, unpack: str, stages: int = 5) -> list[str]:
    kernel = attention_sass.compile_sm90(k_fmt, v_fmt, unpack, stages=stages)
    sass, _usage = attention_sass.sass_of(kernel)
    return attention_sass.sass_loop_body(sass)


def _loop_instructions(k_fmt: str, v_fmt: str, unpack: str) -> int:
    return len(_loop(k_fmt, v_fmt, unpack))


def test_the_loop_body_is_the_longest_backward_branch():
    listing = "\n".join(
        f"        /*{addr:04x}*/                   {op} ;"
        for addr, op in [
            (0x0000, "MOV R1, c[0x0][0x28]"),
            (0x0010, "IADD3 R2, R2, 0x1, RZ"),  # a short loop: 0x10..0x20
            (0x0020, "@P0 BRA 0x10"),
            (0x0030, "HMMA.16816.F32 R4, R8, R12, R4"),  # the long one: 0x30..0x50
            (0x0040, "LOP3.LUT R5, R5, 0xf, RZ, 0xc0, !PT"),
            (0x0050, "@P1 BRA 0x30"),
            (0x0060, "EXIT"),
        ]
    )
    body = attention_sass.sass_loop_body(listing)
    ops = [line.split("*/")[1].split()[0] for line in body]
    assert ops == ["HMMA.16816.F32", "LOP3.LUT", "@P1"]


def test_the_loop_wait_is_read_from_its_depbar():
    body = ["/*2880*/  DEPBAR.LE SB0, 0x7 ;", "/*2890*/  BAR.SYNC.DEFER_BLOCKING 0x0 ;"]
    assert attention_sass.loop_wait(body) == 7
    assert attention_sass.loop_wait(body[1:]) is None


@NEEDS_COMPILER
def test_the_default_stages_keep_a_page_in_flight():
    """With 3 stages the page loop waited for every load at its top (wait count 0: the next
    page's loads included); the default (5) must leave the next page's loads in flight."""
    assert attention_sass.loop_wait(_loop("rot4", "rot4", "words", stages=3)) == 0
    assert attention_sass.loop_wait(_loop("rot4", "rot4", "words")) > 0


@NEEDS_COMPILER
def test_words_unpacking_cuts_the_rot4_page_step():
    """The default rot4 unpacking (AttentionTuning.code_unpack = "words") must stay clearly
    cheaper than the byte-wise one it replaced (872 -> 573 instructions with Triton 3.8)."""
    words = _loop_instructions("rot4", "rot4", "words")
    by_bytes = _loop_instructions("rot4", "rot4", "bytes")
    assert words < 0.8 * by_bytes


@NEEDS_COMPILER
def test_q_rotated_once_takes_the_rotation_out_of_the_split_kernel():
    """AttentionTuning.rotate_q_once: rot4's code before the page loop loses q's rotation
    (1,043 -> 376 instructions, 32 -> 5 barriers at 2 warps with Triton 3.8), down to about
    f16's (510 instructions, 5 barriers), where no q is rotated."""
    counts = {}
    for q_ready in (False, True):
        kernel = attention_sass.compile_sm90("rot4", "rot4", "words", warps=2, q_ready=q_ready)
        before = attention_sass.sass_prologue(attention_sass.sass_of(kernel)[0])
        counts[q_ready] = (len(before), attention_sass.count_ops(before, "BAR"))
    f16 = attention_sass.compile_sm90("f16", "f16", "-", warps=2)
    f16_before = attention_sass.sass_prologue(attention_sass.sass_of(f16)[0])
    assert counts[True][0] < 0.5 * counts[False][0]
    assert counts[True][1] <= attention_sass.count_ops(f16_before, "BAR") < counts[False][1]


def test_opcodes_are_counted_with_any_modifier_or_predicate():
    lines = ["/*0010*/  BAR.SYNC.DEFER_BLOCKING 0x0 ;", "/*0020*/  @!P0 SHFL.BFLY PT, R1 ;",
             "/*0030*/  BAR.ARV 0x1, 0x40 ;", "/*0040*/  BARRIER_X R1 ;"]  # fmt: skip
    assert attention_sass.count_ops(lines, "BAR") == 2
    assert attention_sass.count_ops(lines, "SHFL") == 1


@NEEDS_COMPILER
def test_sums_after_the_loop_take_barriers_and_shuffles_out_of_the_page_step():
    """AttentionTuning.sum_after_loop: the row sums' cross-warp reduction leaves the rot4
    page step (7 -> 5 barriers, 16 -> 8 shuffles at 4 warps with Triton 3.8)."""
    per_step = _loop("rot4", "rot4", "words")
    kernel = attention_sass.compile_sm90("rot4", "rot4", "words", sum_after_loop=True)
    after = attention_sass.sass_loop_body(attention_sass.sass_of(kernel)[0])
    for op in ("BAR", "SHFL"):
        assert attention_sass.count_ops(after, op) < attention_sass.count_ops(per_step, op)


@NEEDS_COMPILER
def test_capped_registers_let_five_two_warp_programs_share_an_sm():
    """AttentionTuning.max_registers=200 with sum_after_loop at 2 warps (rot4/rot4 takes 210
    uncapped): at most 200 registers and no spills (no stack, no local loads or stores)."""
    kernel = attention_sass.compile_sm90(
        "rot4", "rot4", "words", warps=2, sum_after_loop=True, max_registers=200
    )
    sass, usage = attention_sass.sass_of(kernel)
    assert int(re.search(r"REG:(\d+)", usage).group(1)) <= 200
    assert int(re.search(r"STACK:(\d+)", usage).group(1)) == 0
    lines = attention_sass.instruction_lines(sass)
    assert attention_sass.count_ops(lines, "STL") == attention_sass.count_ops(lines, "LDL") == 0


@NEEDS_COMPILER
def test_the_fused_reduce_keeps_the_programs_an_sm():
    """AttentionTuning.fused_reduce: the merge after the page loop takes no more registers or
    shared memory than the loop (rot4/rot4 at its 2 warps: as many programs an SM; Triton 3.8
    here, also checked with the device's 3.6 in docs/kernels.md), and it reads the partials
    past L1 (L1 is not coherent within a launch): no cp.async copy (LDGSTS, through L1 at 4
    bytes) after the page loop, and its loads of 16 bytes marked .cg (LDG.E.128 ... STRONG.GPU
    or .CG in the SASS; counted in the PTX, which names the modifier)."""
    per_sm = []
    for fused in (False, True):
        kernel = attention_sass.compile_sm90("rot4", "rot4", "words", warps=2, fused_reduce=fused)
        sass, usage = attention_sass.sass_of(kernel)
        regs = int(re.search(r"REG:(\d+)", usage).group(1))
        limits = attention_sass.SmLimits()
        per_sm.append(attention_sass.programs_per_sm(regs, 2, kernel.metadata.shared, limits))
    assert per_sm[1] == per_sm[0]
    after = attention_sass.sass_epilogue(sass)
    assert attention_sass.count_ops(after, "LDGSTS") == 0
    assert attention_sass.count_ops(after, "ATOM") + attention_sass.count_ops(after, "ATOMG") > 0
    ptx = kernel.asm["ptx"]
    merge = ptx[ptx.index("atom.global.gpu.acq_rel.add") :]
    assert "cp.async" not in merge
    assert merge.count("ld.global.cg.v4") > 0


@NEEDS_COMPILER
def test_the_flat_v_tile_is_stored_sixteen_bytes_at_a_time():
    """AttentionTuning.flat_v: rot4 V's tile reaches the dot's layout through 16-byte shared
    stores (STS.128), none of 2 bytes, at as many programs an SM. Triton 3.8 here does that
    with or without it; the device's 3.6 needs it (128 STS.U16 a step without: the raw SASS
    in docs/measurements/2026-11-27-s8-flat-v-sass-sm90.txt)."""
    kernel = attention_sass.compile_sm90("rot4", "rot4", "words", warps=2, flat_v=True)
    sass, usage = attention_sass.sass_of(kernel)
    body = attention_sass.sass_loop_body(sass)
    stores = [line for line in body if re.search(r"\*/\s+(?:@!?U?P\w+\s+)?STS", line)]
    assert any("STS.128" in line for line in stores)
    assert not any("STS.U16" in line for line in stores)
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    limits = attention_sass.SmLimits()
    default = attention_sass.compile_sm90("rot4", "rot4", "words", warps=2)
    default_regs = int(re.search(r"REG:(\d+)", attention_sass.sass_of(default)[1]).group(1))
    assert attention_sass.programs_per_sm(
        regs, 2, kernel.metadata.shared, limits
    ) == attention_sass.programs_per_sm(default_regs, 2, default.metadata.shared, limits)
