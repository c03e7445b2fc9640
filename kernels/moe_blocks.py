"""Runs of 16 weights of each expert block format, as the expert GEMV's integer dot products
read them: codes packed four to an int32 word, in weight order, with a float scale and offset.

    sum over a run of w x'  =  dx (s * sum(u xq) - c * sum(xq))

u are unsigned byte codes (the dp4a's unsigned operand), xq and dx x's 8-bit form (act_quant.py:
int8 per value, one scale per 32, the sum of xq per 16), s and c per run:

    Q4_K / Q5_K  w = d sc q - dmin m  (sub-block of 32)    u = q,       s = d sc, c = dmin m
    Q6_K         w = d sc (q - 32)    (run of 16)          u = q,       s = d sc, c = 32 s
    Q8_0         w = d q, q int8      (block of 32)        u = q + 128, s = d,    c = 128 d
    MXFP4        w = 2^(e-128) v, v = kvalues_mxfp4[n]     u = v + 12,  s = 2^(e-128), c = 12 s
                 (ggml's E2M1 values doubled: 0 1 2 3 4 6 8 12, and their negatives)
    Q4_0 / Q5_0  w = d (q - 8) / d (q - 16)  (block of 32)  u = q,       s = d,    c = 8 d / 16 d
    Q4_1 / Q5_1  w = d q + m                 (block of 32)  u = q,       s = d,    c = -m
                 (Q5_0 / Q5_1: the fifth bit of weight i is bit i of the block's 32-bit qh)

Every format's codes of a run sit in 4 consecutive words of one plane with the weights in order
(ggml's layouts, ggml-common.h; the docstrings of gemv_kquants.py and gemv_dp4a.py walk
through them): a run is a word-aligned 16-byte piece of bytes or a nibble / 2-bit field of
each, so a code word is a shift and a mask of a loaded word. MXFP4's nibble becomes its
unsigned value bytewise inside the word (`mxfp4_words`: 14 logic and add operations for 4
weights, no table, no carries between bytes), so all five formats meet x in `dp4a`.

`load_runs` returns (u [BN, NR, 4] int32 words, s [BN, NR], c [BN, NR] float32) for weight
rows `wrow` [BN] (rows of the [n_expert n_out, n_in] matrix) and runs `r` [NR] of those rows
(run r = weights 16 r .. 16 r + 15), masked by row_mask and run_mask (masked: u, s, c = 0).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.act_quant import dp4a
from kernels.gemv_kquants import _scale_min_k4

Q4_K = tl.constexpr(0)
Q5_K = tl.constexpr(1)
Q6_K = tl.constexpr(2)
Q8_0 = tl.constexpr(3)
MXFP4 = tl.constexpr(4)
Q4_0 = tl.constexpr(5)
Q4_1 = tl.constexpr(6)
Q5_0 = tl.constexpr(7)
Q5_1 = tl.constexpr(8)
FORMAT_CODES = {
    "Q4_K": 0, "Q5_K": 1, "Q6_K": 2, "Q8_0": 3, "MXFP4": 4,
    "Q4_0": 5, "Q4_1": 6, "Q5_0": 7, "Q5_1": 8,
}  # fmt: skip

LOW_NIBBLES = tl.constexpr(0x0F0F0F0F)
ONES = tl.constexpr(0x01010101)
TWELVES = tl.constexpr(0x0C0C0C0C)
TOP_BITS = tl.constexpr(-2139062144)  # 0x80808080 as an int32


@triton.jit
def mxfp4_words(nibbles):
    """int32 words of 4 MXFP4 codes (one per byte, 0..15) -> words of kvalues_mxfp4[n] + 12
    (0..24) per byte. n = sign e1 e0 m0: |v| = m0 for e = 0, else (2 + m0) << (e - 1), i.e.
    A + B m0 with A = 2 e0 + 4 e1 + 2 e0 e1 and B = 1 + e1 + 2 e0 e1. Every byte stays in
    0..24, so the word's add and subtract never carry into the next byte."""
    m0 = nibbles & ONES
    e0 = (nibbles >> 1) & ONES
    e1 = (nibbles >> 2) & ONES
    sign = (nibbles >> 3) & ONES
    both = e0 & e1
    a = (e0 << 1) + (e1 << 2) + (both << 1)
    b = ONES + e1 + (both << 1)
    magnitude = a + (b & ((m0 << 8) - m0))  # (x << 8) - x: 0xFF in each byte where x has 1
    negative = (sign << 8) - sign
    return ((TWELVES + magnitude) & (negative ^ -1)) | ((TWELVES - magnitude) & negative)


@triton.jit
def fifth_bits(t):
    """Bits 0..3 of t -> bit 4 of bytes 0..3 (Q5_0 / Q5_1: four weights' fifth bits)."""
    return ((t & 1) | ((t & 2) << 7) | ((t & 4) << 14) | ((t & 8) << 21)) << 4


@triton.jit
def _half_to_float(e):
    """E8M0 exponent bytes -> 2^(e - 128) as float32 (ggml's GGML_E8M0_TO_FP32_HALF)."""
    e = e.to(tl.int32)
    bits = tl.where(e < 2, (e + 1) << 21, (e - 1) << 23)  # e < 2: the subnormals 2^-128, 2^-127
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def load_runs(p0, p1, p2, p3, p4, wrow, row_mask, r, run_mask, NB, FMT: tl.constexpr):
    """See the module docstring. Planes p0..p4 by format (PackedWeight's planes; `words`:
    the plane read as int32):
        Q4_K  d, dmin, scales (uint8), qs words, (unused)
        Q5_K  d, dmin, scales (uint8), qs words, qh words
        Q6_K  ql words, qh words, scales (int8), d, (unused)
        Q8_0  d, qs words, (unused) x3
        MXFP4 e (uint8), qs words, (unused) x3
        Q4_0 / Q4_1 / Q5_0 / Q5_1  d, qs words, m (Q4_1, Q5_1), qh (int32, Q5_0, Q5_1),
              (unused)"""
    w = tl.arange(0, 4)
    mask2 = row_mask[:, None] & run_mask[None, :]
    mask3 = mask2[:, :, None]
    if FMT == Q4_K or FMT == Q5_K or FMT == Q6_K:  # noqa: SIM109 (a static if: no `in`)
        blk = r // 16
        j = r % 16  # the run within its super-block
        row_blk = wrow[:, None] * NB + blk[None, :]  # [BN, NR]
        if FMT == Q6_K:
            half = j // 8
            quarter = (j % 8) // 2
            run = (j % 2)[None, :]
            ql_word = row_blk * 32 + (half * 16 + (quarter % 2) * 8)[None, :] + run * 4
            qh_word = row_blk * 16 + (half * 8)[None, :] + run * 4
            ql = tl.load(p0 + ql_word[:, :, None] + w[None, None, :], mask=mask3, other=0)
            qh = tl.load(p1 + qh_word[:, :, None] + w[None, None, :], mask=mask3, other=0)
            low = (ql >> (4 * (quarter // 2))[None, :, None]) & LOW_NIBBLES
            high = ((qh >> (2 * quarter)[None, :, None]) & 0x03030303) << 4
            u = low | high
            d = tl.load(p3 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            sc = tl.load(p2 + row_blk * 16 + j[None, :], mask=mask2, other=0).to(tl.float32)
            s = d * sc
            c = 32.0 * s
        else:
            sub = j // 2  # the sub-block of 32: low nibbles of chunk sub // 2 when even
            qs_word = row_blk * 32 + ((sub // 2) * 8 + (j % 2) * 4)[None, :]
            qs = tl.load(p3 + qs_word[:, :, None] + w[None, None, :], mask=mask3, other=0)
            u = (qs >> (4 * (sub % 2))[None, :, None]) & LOW_NIBBLES
            if FMT == Q5_K:  # bit `sub` of qh byte i is the fifth bit of weight 32 sub + i
                qh_word = row_blk * 8 + ((j % 2) * 4)[None, :]
                qh = tl.load(p4 + qh_word[:, :, None] + w[None, None, :], mask=mask3, other=0)
                u = u | (((qh >> sub[None, :, None]) & ONES) << 4)
            d = tl.load(p0 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            dmin = tl.load(p1 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            sc, m = _scale_min_k4(p2 + row_blk * 12, sub[None, :], mask2)
            s = d * sc
            c = dmin * m
    else:  # blocks of 32: two runs a block
        blk = r // 2
        half = (r % 2)[None, :]
        row_blk = wrow[:, None] * NB + blk[None, :]
        if FMT == Q8_0:
            qs = tl.load(p1 + (row_blk * 8 + half * 4)[:, :, None] + w[None, None, :],
                         mask=mask3, other=0)  # fmt: skip
            u = qs ^ TOP_BITS
            s = tl.load(p0 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            c = 128.0 * s
        else:  # 4-bit codes: run 0 the low nibbles of the block's 4 words, run 1 the high ones
            qs = tl.load(p1 + (row_blk * 4)[:, :, None] + w[None, None, :], mask=mask3, other=0)
            u = (qs >> (4 * half)[:, :, None]) & LOW_NIBBLES
            if FMT == MXFP4:
                u = mxfp4_words(u)
                e = tl.load(p0 + row_blk, mask=mask2, other=0)
                s = tl.where(mask2, _half_to_float(e), 0.0)
                c = 12.0 * s
            else:
                s = tl.load(p0 + row_blk, mask=mask2, other=0.0).to(tl.float32)
                if FMT == Q5_0 or FMT == Q5_1:  # noqa: SIM109 (a static if: no `in`)
                    qh = tl.load(p3 + row_blk, mask=mask2, other=0)
                    u = u | fifth_bits(
                        qh[:, :, None] >> (16 * half[:, :, None] + 4 * w[None, None, :])
                    )
                if FMT == Q4_1 or FMT == Q5_1:  # noqa: SIM109
                    c = -tl.load(p2 + row_blk, mask=mask2, other=0.0).to(tl.float32)
                elif FMT == Q5_0:
                    c = 16.0 * s
                else:
                    c = 8.0 * s
    return u, s, c


@triton.jit
def run_dots(u, s, c, xq, dx, xsum, ASM: tl.constexpr):
    """sum over the runs of dx (s sum(u xq) - c sum(xq)) -> [BN]; u [BN, NR, 4], xq [BN, NR,
    4] (x's words, the same in every row), dx and xsum [BN, NR]."""
    dots = tl.sum(dp4a(u, xq, tl.zeros_like(u), ASM), axis=2)
    return tl.sum(dx * (s * dots.to(tl.float32) - c * xsum.to(tl.float32)), axis=1)


def plane_args(packed) -> tuple[torch.Tensor, ...]:
    """load_runs' p0..p4 for a PackedWeight of one of the expert formats."""
    p = packed.planes

    def words(plane: torch.Tensor) -> torch.Tensor:
        return plane.reshape(-1).view(torch.int32)

    name = packed.fmt.name
    if name in ("Q4_K", "Q5_K"):
        qs = words(p["qs"])
        return p["d"], p["dmin"], p["scales"], qs, words(p["qh"]) if "qh" in p else qs
    if name == "Q6_K":
        return words(p["ql"]), words(p["qh"]), p["scales"], p["d"], p["d"]
    if name == "Q8_0":
        return p["d"], words(p["qs"]), p["d"], p["d"], p["d"]
    if name == "MXFP4":
        return p["e"], words(p["qs"]), p["e"], p["e"], p["e"]
    return p["d"], words(p["qs"]), p.get("m", p["d"]), p.get("qh", p["d"]), p["d"]
