"""4-bit codes to f16, four bytes (eight codes) per instruction sequence; Q4_K and Q6_K weights
to f16 the same way, two bytes at a time, their scales applied (kernels/dequant_mma.py).

A rot4 byte holds two codes, c_lo = b & 15 (an even dimension) and c_hi = b >> 4 (the odd
one after it). The f16 with bits 0x6400 | c is 1024 + c exactly, so codes become f16 values
with bit operations and one exact f16 subtraction, never the int-to-float unit (FasterTransformer's
and Marlin's trick). `rot4_codes_f16` does it for a tensor of bytes, four at a time in 32-bit
registers on the GPU:

    lo = prmt(word, 0, 0x4140)                  halves b0, b1      (bytes b0, 0, b1, 0)
    even01 = (lo & 0x000F000F) | 0x64006400     1024 + c_lo of b0, b1, as f16x2
    odd01  = (lo & 0x00F000F0) | 0x64006400     1024 + 16 c_hi of b0, b1
    even01 - 1024, odd01 * (1/16) - 64          exact: the codes as f16x2

and the same for b2, b3 from prmt(word, 0, 0x4342): 2 byte permutes, 4 LOP3s and 4 f16x2
operations for 8 codes, where Triton's own lowering of the same arithmetic extracts every
byte on its own (a PRMT each), shifts and re-packs.

The Q4_K and Q6_K sequences take two bytes (a 16-bit register) at a time: the dequantizing
MMA's codes are laid out as wgmma's register operand wants its f16 weights, a pair of k, k + 1
in a register and the next pair 8 further on, and four bytes a sequence made Triton extract and
re-pack every byte (7 PRMT a word: 148 of the Q4_K loop's 740 instructions at 16 rows under
Triton 3.6, 36 of 634 with pairs).

ASM=False computes the same values with plain integer and float operations, for Triton's CPU
interpreter (inline assembly does not run there); a gpu-marked test checks both agree.
"""

from __future__ import annotations

import triton
import triton.language as tl

_ROT4_ASM = tl.constexpr("""
{
.reg .b32 w01, w23, magic, sixteenth, bias;
mov.b32 magic, 0x64006400;
mov.b32 sixteenth, 0x2C002C00;
mov.b32 bias, 0xD400D400;
prmt.b32 w01, $4, 0, 0x4140;
prmt.b32 w23, $4, 0, 0x4342;
lop3.b32 $0, w01, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 $1, w23, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 $2, w01, 0x00F000F0, 0x64006400, 0xEA;
lop3.b32 $3, w23, 0x00F000F0, 0x64006400, 0xEA;
sub.f16x2 $0, $0, magic;
sub.f16x2 $1, $1, magic;
fma.rn.f16x2 $2, $2, sixteenth, bias;
fma.rn.f16x2 $3, $3, sixteenth, bias;
}
""")
# 0x2C00 is the f16 1/16 and 0xD400 the f16 -64; lop3 0xEA is (a & b) | c.


@triton.jit
def rot4_codes_f16(b, ASM: tl.constexpr, PURE: tl.constexpr = True):
    """Bytes b (uint8) -> (b & 15, b >> 4) as two f16 tensors of b's shape, exact.

    PURE=False declares the assembly as having side effects, only so that Triton does not
    move a layout conversion of its results above it onto the bytes (see
    kv_tiles.load_rot4_halves: V wants the f16 tile converted, not the bytes)."""
    if ASM:
        return tl.inline_asm_elementwise(
            _ROT4_ASM,
            "=r,=r,=r,=r,r",
            [b],
            dtype=(tl.float16, tl.float16),
            is_pure=PURE,
            pack=4,
        )
    else:
        low = ((b & 15).to(tl.int16) | 0x6400).to(tl.float16, bitcast=True) - 1024.0
        high = ((b >> 4).to(tl.int16) << 4 | 0x6400).to(tl.float16, bitcast=True)
        return low, high * 0.0625 - 64.0


_Q8_ASM = tl.constexpr("""
{
.reg .b32 w01, w23, magic;
mov.b32 magic, 0x64806480;
prmt.b32 w01, $2, 0, 0x4140;
prmt.b32 w23, $2, 0, 0x4342;
lop3.b32 $0, w01, 0x00800080, 0x64006400, 0xBE;
lop3.b32 $1, w23, 0x00800080, 0x64006400, 0xBE;
sub.f16x2 $0, $0, magic;
sub.f16x2 $1, $1, magic;
}
""")
# lop3 0xBE is (a ^ b) | c: the byte q ^ 0x80 is q + 128 unsigned, so 0x6400 | (q ^ 0x80) is
# the f16 1024 + 128 + q, and 0x6480 is 1152.


@triton.jit
def q8_codes_f16(q, ASM: tl.constexpr, PURE: tl.constexpr = True):
    """int8 codes q (-127..127) -> the same values as f16, exact, four bytes at a time as
    rot4_codes_f16 (PURE likewise)."""
    if ASM:
        return tl.inline_asm_elementwise(
            _Q8_ASM, "=r,=r,r", [q], dtype=tl.float16, is_pure=PURE, pack=4
        )
    else:
        return (q.to(tl.int16) + 0x6480).to(tl.float16, bitcast=True) - 1152.0


_Q4_K_PAIR_ASM = tl.constexpr("""
{
.reg .b32 w, lo, hi, magic, sixteenth, bias;
mov.b32 magic, 0x64006400;
mov.b32 sixteenth, 0x2C002C00;
mov.b32 bias, 0xD400D400;
cvt.u32.u16 w, $2;
prmt.b32 w, w, 0, 0x4140;
lop3.b32 lo, w, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 hi, w, 0x00F000F0, 0x64006400, 0xEA;
sub.f16x2 lo, lo, magic;
fma.rn.f16x2 hi, hi, sixteenth, bias;
fma.rn.f16x2 $0, lo, $3, $4;
fma.rn.f16x2 $1, hi, $5, $6;
}
""")
# rot4_codes_f16's sequence on bytes b0, b1 (halves b0, 0, b1, 0 after the PRMT), then one
# f16x2 FMA a pair of weights: 8 instructions for 4 weights (the constants' moves hoisted).


@triton.jit
def scaled_nibbles_f16(b, s_lo, m_lo, s_hi, m_hi, ASM: tl.constexpr):
    """Bytes b (uint8) -> (b & 15) s_lo + m_lo and (b >> 4) s_hi + m_hi as f16, each rounded
    once (an FMA on the exact codes): a Q4_K chunk's two sub-blocks of weights, s = d sc and
    m = -dmin min given in f16 (any shape that broadcasts to b's). ASM: rot4_codes_f16's
    sequence and an f16x2 FMA on two bytes at a time; otherwise the same values in
    float32 rounded to f16 (equal but where float32 rounds the sum first: a spread of more
    than 2^13 between the code's product and m, and then at most 1 f16 unit apart)."""
    if ASM:
        return tl.inline_asm_elementwise(
            _Q4_K_PAIR_ASM,
            "=r,=r,h,r,r,r,r",
            [b, s_lo, m_lo, s_hi, m_hi],
            dtype=(tl.float16, tl.float16),
            is_pure=True,
            pack=2,
        )
    else:
        low = (b & 15).to(tl.float32) * s_lo.to(tl.float32) + m_lo.to(tl.float32)
        high = (b >> 4).to(tl.float32) * s_hi.to(tl.float32) + m_hi.to(tl.float32)
        return low.to(tl.float16), high.to(tl.float16)


def _q6_k_pair_asm(run: int) -> tl.constexpr:
    """Q6_K's pair of quarters run (low nibbles of ql) and run + 2 (high nibbles), two bytes of
    ql and of qh at a time: the qh bits 2 run.. and 2 run + 4.. of each byte go to bits 4..5 of
    its half (shl 4 - 2 run, shr 2 run), are ORed into 0x6400 | nibble (lop3 0xF8: a | (b &
    c)), and 0x6400 | q is the f16 1024 + q: less 1056 (0x6420) that is q - 32, exact, then
    one f16x2 multiply by the scale."""
    return tl.constexpr(f"""
{{
.reg .b32 l, h, a, b, t, magic;
mov.b32 magic, 0x64206420;
cvt.u32.u16 l, $2;
cvt.u32.u16 h, $3;
prmt.b32 l, l, 0, 0x4140;
prmt.b32 h, h, 0, 0x4140;
lop3.b32 a, l, 0x000F000F, 0x64006400, 0xEA;
shl.b32 t, h, {4 - 2 * run};
lop3.b32 a, a, t, 0x00300030, 0xF8;
sub.f16x2 a, a, magic;
mul.rn.f16x2 $0, a, $4;
shr.b32 b, l, 4;
lop3.b32 b, b, 0x000F000F, 0x64006400, 0xEA;
shr.b32 t, h, {2 * run};
lop3.b32 b, b, t, 0x00300030, 0xF8;
sub.f16x2 b, b, magic;
mul.rn.f16x2 $1, b, $5;
}}
""")


_Q6_K_PAIR_ASM_RUN0 = _q6_k_pair_asm(0)
_Q6_K_PAIR_ASM_RUN1 = _q6_k_pair_asm(1)


@triton.jit
def q6_k_weights_f16(ql, qh, s_a, s_b, RUN: tl.constexpr, ASM: tl.constexpr):
    """A Q6_K piece's weights in f16: ql, qh bytes (uint8, one shape) -> (code_a - 32) s_a
    and (code_b - 32) s_b, rounded once, where code_a = (ql & 15) | ((qh >> 2 RUN) & 3) << 4
    (quarter RUN of a half super-block) and code_b = (ql >> 4) | ((qh >> 2 RUN + 4) & 3) << 4
    (quarter RUN + 2); s = d sc in f16 (broadcast to ql's shape). ASM: _q6_k_pair_asm, 15
    instructions for 4 weights; otherwise the same in float32 (exact: a 6-bit code times an
    f16 is exact in float32, so one rounding to f16 either way)."""
    if ASM and RUN == 0:
        return tl.inline_asm_elementwise(
            _Q6_K_PAIR_ASM_RUN0, "=r,=r,h,h,r,r", [ql, qh, s_a, s_b],
            dtype=(tl.float16, tl.float16), is_pure=True, pack=2,
        )  # fmt: skip
    elif ASM:
        return tl.inline_asm_elementwise(
            _Q6_K_PAIR_ASM_RUN1, "=r,=r,h,h,r,r", [ql, qh, s_a, s_b],
            dtype=(tl.float16, tl.float16), is_pure=True, pack=2,
        )  # fmt: skip
    else:
        qh = qh.to(tl.int32)
        code_a = (ql & 15).to(tl.int32) | (((qh >> (2 * RUN)) & 3) << 4)
        code_b = (ql >> 4).to(tl.int32) | (((qh >> (2 * RUN + 4)) & 3) << 4)
        w_a = (code_a - 32).to(tl.float32) * s_a.to(tl.float32)
        w_b = (code_b - 32).to(tl.float32) * s_b.to(tl.float32)
        return w_a.to(tl.float16), w_b.to(tl.float16)
