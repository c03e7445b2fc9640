"""4-bit codes to f16, four bytes (eight codes) per instruction sequence.

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
