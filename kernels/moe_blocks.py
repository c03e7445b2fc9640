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
(ggml's layouts, ggml-common.h; gemv_kquants.py's docstring walks through the K-quants'):
a run is a word-aligned 16-byte piece of bytes or a nibble / 2-bit field of
each, so a code word is a shift and a mask of a loaded word. MXFP4's nibble becomes its
unsigned value bytewise inside the word: compiled, by byte permutes from a 16-byte table
(`mxfp4_code_words`: 13 operations for the 8 codes of a word); in Triton's interpreter by logic
and adds (`mxfp4_words`: 14 operations for 4 codes, no carries between bytes); so every
format meets x in `dp4a`.

The pieces both expert GEMV kernels (moe_gemv.py, moe_one_token.py) share are here too: x's
runs rounded to 8 bits in registers (`runs_in_8_bits`) and the gated activations (`glu`); their
sums over the groups go through tree_sums.tree_sum, in an order the source fixes.

`load_pairs` reads weight rows `wrow` [BN] (rows of the [n_expert n_out, n_in] matrix) in
groups of 32 weights: one 16-byte piece of codes a group, split into two runs (run r = weights
16 r .. 16 r + 15 of the row), so that every byte of codes is loaded once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.act_quant import dp4a, inverse_scale, rounded_words

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
    (0..24) per byte. n = sign e1 e0 m0, m = n & 7: |v| = m for m < 4 (e1 = 0), else m plus
    (m & 3) + 2 e0 m0 (4 5 6 7 -> 4 6 8 12); v + 12 = 12 + |v| - 2 (|v| if negative). x * 255
    spreads a 0/1 byte over its byte; every byte stays in 0..24, so no add or subtract of the
    words carries or borrows into the next byte."""
    upper = ((nibbles >> 2) & ONES) * 255  # e1
    extra = (nibbles & 0x03030303) + ((((nibbles >> 1) & nibbles) & ONES) << 1)
    magnitude = (nibbles & 0x07070707) + (extra & upper)
    negative = ((nibbles >> 3) & ONES) * 255
    return TWELVES + magnitude - ((magnitude & negative) << 1)


# ggml's E2M1 values doubled, plus 12 (mxfp4_words' bytes), as a 16-byte table in 4 words:
# codes 0..3, 4..7, 8..11, 12..15 (byte i of a word: code 4 w + i)
_MXFP4_TABLE_PTX = tl.constexpr(
    "{ .reg .b32 q, h, t0, t1, t2, t3, l, u, s0, s1;"
    " mov.b32 t0, 0x0F0E0D0C; mov.b32 t1, 0x18141210;"
    " mov.b32 t2, 0x090A0B0C; mov.b32 t3, 0x00040608;"
    " and.b32 q, $2, 0x77777777;"  # each nibble's place in its half of the table
    " and.b32 h, $2, 0x88888888; shr.u32 h, h, 1; or.b32 h, h, 0x32103210;"  # which half
    " prmt.b32 l, t0, t1, q; prmt.b32 u, t2, t3, q; prmt.b32 s0, l, u, h;"  # nibbles 0..3
    " shr.u32 q, q, 16; shr.u32 h, h, 16;"
    " prmt.b32 l, t0, t1, q; prmt.b32 u, t2, t3, q; prmt.b32 s1, l, u, h;"  # nibbles 4..7
    " prmt.b32 $0, s0, s1, 0x6420; prmt.b32 $1, s0, s1, 0x7531; }"  # low, high nibbles
)


@triton.jit
def mxfp4_code_words(qs, PRMT: tl.constexpr):
    """int32 words of MXFP4 codes as stored (byte i: code i in the low nibble, 16 + i in the
    high) -> (low nibbles' words, high nibbles' words) of kvalues_mxfp4[n] + 12 per byte.
    PRMT: by byte permutes from a 16-byte table (ggml's get_int_from_table_16, with the
    selectors masked to 3 bits: prmt's fourth bit would replicate a sign): 13 operations for 8
    codes, against 30 for mxfp4_words twice (inline PTX: not in Triton's interpreter)."""
    if PRMT:
        lo, hi = tl.inline_asm_elementwise(
            _MXFP4_TABLE_PTX, "=r,=r,r", [qs], dtype=(tl.int32, tl.int32), is_pure=True, pack=1
        )
    else:
        lo = mxfp4_words(qs & LOW_NIBBLES)
        hi = mxfp4_words((qs >> 4) & LOW_NIBBLES)
    return lo, hi


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
def q4_k_scales(s0, s1, s2, chunk):
    """(sc, m) of sub-blocks 2c and 2c + 1 of chunk c from the 12 scale bytes read as 3 int32
    words (ggml's get_scale_min_k4, four sub-blocks per operation): sub-blocks 0..3 are the low 6
    bits of s0 (scales) and s1 (mins); 4..7 the nibbles of s2 with bits 6..7 of s0 / s1 on top."""
    upper = chunk >= 2
    sc4 = tl.where(upper, (s2 & LOW_NIBBLES) | ((s0 >> 2) & 0x30303030), s0 & 0x3F3F3F3F)
    m4 = tl.where(upper, ((s2 >> 4) & LOW_NIBBLES) | ((s1 >> 2) & 0x30303030), s1 & 0x3F3F3F3F)
    shift = (chunk % 2) * 16
    sc_a = ((sc4 >> shift) & 0xFF).to(tl.float32)
    sc_b = ((sc4 >> (shift + 8)) & 0xFF).to(tl.float32)
    m_a = ((m4 >> shift) & 0xFF).to(tl.float32)
    m_b = ((m4 >> (shift + 8)) & 0xFF).to(tl.float32)
    return sc_a, sc_b, m_a, m_b


@triton.jit
def load_pairs(p0, p1, p2, p3, p4, wrow, row_mask, ge, group_mask, NB, FMT: tl.constexpr,
               PRMT: tl.constexpr = False):  # fmt: skip
    """Groups `ge` [NG] of 32 weights of rows `wrow` [BN], each one 16-byte piece of the codes
    plane read once and split into its two runs, lo and hi (low and high nibbles; Q8_0: its
    two halves) -> (u_lo, u_hi [BN, NG, 4] int32 code words; s_lo, c_lo, s_hi, c_hi [BN, NG]
    float32; r_lo, r_hi [NG] the runs' indices in the row, for x). Masked: codes, s and c 0.
    Planes p0..p4 by format (PackedWeight's planes; `words`: the plane read as int32):
        Q4_K  d, dmin, scales words, qs words, (unused)
        Q5_K  d, dmin, scales words, qs words, qh words
        Q6_K  ql words, qh words, scales (int8), d, (unused)
        Q8_0  d, qs words, (unused) x3
        MXFP4 e (uint8), qs words, (unused) x3
        Q4_0 / Q4_1 / Q5_0 / Q5_1  d, qs words, m (Q4_1, Q5_1), qh (int32, Q5_0, Q5_1),
              (unused)
    The K-quants' group t of a super-block is its codes' words 4t .. 4t + 3:
        Q4_K / Q5_K  chunk c = t // 2, half h = t % 2: runs 4c + h (sub-block 2c) and
                     4c + 2 + h (sub-block 2c + 1) of the super-block
        Q6_K         half H = t // 4, quarter q = (t // 2) % 2, l = t % 2: runs 8H + 2q + l
                     (ql's low nibbles, qh bits 2q) and that + 4 (high nibbles, bits 2q + 4)"""
    w = tl.arange(0, 4)
    mask2 = row_mask[:, None] & group_mask[None, :]
    mask3 = mask2[:, :, None]
    if FMT == Q4_K or FMT == Q5_K or FMT == Q6_K:  # noqa: SIM109 (a static if: no `in`)
        blk = ge // 8
        t = ge % 8
        row_blk = wrow[:, None] * NB + blk[None, :]  # [BN, NG]
        codes = (row_blk * 32 + (4 * t)[None, :])[:, :, None] + w[None, None, :]
        if FMT == Q6_K:
            half = t // 4
            quarter = (t // 2) % 2
            r_lo = 16 * blk + 8 * half + 2 * quarter + t % 2
            r_hi = r_lo + 4
            ql = tl.load(p0 + codes, mask=mask3, other=0)
            qh_word = row_blk * 16 + (8 * half + 4 * (t % 2))[None, :]
            qh = tl.load(p1 + qh_word[:, :, None] + w[None, None, :], mask=mask3, other=0)
            shift = (2 * quarter)[None, :, None]
            u_lo = (ql & LOW_NIBBLES) | (((qh >> shift) & 0x03030303) << 4)
            u_hi = ((ql >> 4) & LOW_NIBBLES) | (((qh >> (shift + 4)) & 0x03030303) << 4)
            d = tl.load(p3 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            scales = p2 + row_blk * 16
            s_lo = d * tl.load(scales + (r_lo % 16)[None, :], mask=mask2, other=0).to(tl.float32)
            s_hi = d * tl.load(scales + (r_hi % 16)[None, :], mask=mask2, other=0).to(tl.float32)
            c_lo = 32.0 * s_lo
            c_hi = 32.0 * s_hi
        else:
            chunk = t // 2
            r_lo = 16 * blk + 4 * chunk + t % 2
            r_hi = r_lo + 2
            qs = tl.load(p3 + codes, mask=mask3, other=0)
            u_lo = qs & LOW_NIBBLES
            u_hi = (qs >> 4) & LOW_NIBBLES
            if FMT == Q5_K:  # bit j of qh byte i: the fifth bit of weight 32 j + i
                qh_word = row_blk * 8 + (4 * (t % 2))[None, :]
                qh = tl.load(p4 + qh_word[:, :, None] + w[None, None, :], mask=mask3, other=0)
                sub = (2 * chunk)[None, :, None]
                u_lo = u_lo | (((qh >> sub) & ONES) << 4)
                u_hi = u_hi | (((qh >> (sub + 1)) & ONES) << 4)
            d = tl.load(p0 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            dmin = tl.load(p1 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            s0 = tl.load(p2 + row_blk * 3, mask=mask2, other=0)
            s1 = tl.load(p2 + row_blk * 3 + 1, mask=mask2, other=0)
            s2 = tl.load(p2 + row_blk * 3 + 2, mask=mask2, other=0)
            sc_a, sc_b, m_a, m_b = q4_k_scales(s0, s1, s2, chunk[None, :])
            s_lo = d * sc_a
            s_hi = d * sc_b
            c_lo = dmin * m_a
            c_hi = dmin * m_b
    else:  # blocks of 32: runs 2 blk and 2 blk + 1
        r_lo = 2 * ge
        r_hi = r_lo + 1
        row_blk = wrow[:, None] * NB + ge[None, :]
        if FMT == Q8_0:
            codes = (row_blk * 8)[:, :, None] + w[None, None, :]
            u_lo = tl.load(p1 + codes, mask=mask3, other=0) ^ TOP_BITS
            u_hi = tl.load(p1 + codes + 4, mask=mask3, other=0) ^ TOP_BITS
            s_lo = tl.load(p0 + row_blk, mask=mask2, other=0.0).to(tl.float32)
            c_lo = 128.0 * s_lo
        else:  # 4-bit codes: weights i (low nibble of byte i) and 16 + i (high nibble)
            qs = tl.load(p1 + (row_blk * 4)[:, :, None] + w[None, None, :], mask=mask3, other=0)
            if FMT == MXFP4:
                u_lo, u_hi = mxfp4_code_words(qs, PRMT)
                e = tl.load(p0 + row_blk, mask=mask2, other=0)
                s_lo = tl.where(mask2, _half_to_float(e), 0.0)
                c_lo = 12.0 * s_lo
            else:
                u_lo = qs & LOW_NIBBLES
                u_hi = (qs >> 4) & LOW_NIBBLES
                s_lo = tl.load(p0 + row_blk, mask=mask2, other=0.0).to(tl.float32)
                if FMT == Q5_0 or FMT == Q5_1:  # noqa: SIM109 (a static if: no `in`)
                    qh = tl.load(p3 + row_blk, mask=mask2, other=0)[:, :, None]
                    u_lo = u_lo | fifth_bits(qh >> (4 * w[None, None, :]))
                    u_hi = u_hi | fifth_bits(qh >> (16 + 4 * w[None, None, :]))
                if FMT == Q4_1 or FMT == Q5_1:  # noqa: SIM109
                    c_lo = -tl.load(p2 + row_blk, mask=mask2, other=0.0).to(tl.float32)
                elif FMT == Q5_0:
                    c_lo = 16.0 * s_lo
                else:
                    c_lo = 8.0 * s_lo
        s_hi = s_lo
        c_hi = c_lo
    return u_lo, u_hi, s_lo, c_lo, s_hi, c_hi, r_lo, r_hi


@triton.jit
def chained_dots(u, xq, ASM: tl.constexpr):
    """[BN, NG, 4] -> [BN, NG]: the sum over the 4 words of dp4a(u, xq), the four dp4a
    chained through their accumulator (a thread holds a run's 4 words, so the splits move no
    data), not four products from zero added up."""
    u01, u23 = tl.split(tl.reshape(u, [u.shape[0], u.shape[1], 2, 2]))
    x01, x23 = tl.split(tl.reshape(xq, [xq.shape[0], xq.shape[1], 2, 2]))
    u0, u1 = tl.split(u01)
    u2, u3 = tl.split(u23)
    x0, x1 = tl.split(x01)
    x2, x3 = tl.split(x23)
    return dp4a(u3, x3, dp4a(u2, x2, dp4a(u1, x1, dp4a(u0, x0, tl.zeros_like(u0), ASM), ASM),
                             ASM), ASM)  # fmt: skip


@triton.jit
def run_sums(u, s, c, xq, xsum, ASM: tl.constexpr):
    """s sum(u xq) - c sum(xq) per run -> [BN, NG]; u [BN, NG, 4], xq [BN, NG, 4] (x's words,
    the same in every row), xsum [BN, NG]: one run a group. One explicit fma: left to the
    compiler, a mul and an add may be contracted either way round, and not the same way in
    every kernel (the expert down's two ways to read h must give the same bits)."""
    dots = chained_dots(u, xq, ASM)
    return tl.fma(s, dots.to(tl.float32), -(c * xsum.to(tl.float32)))


@triton.jit
def group_terms(dx_lo, sums_lo, dx_hi, sums_hi):
    """dx_lo sums_lo + dx_hi sums_hi: a group's two runs scaled by x's scales and added (before
    the sum over the groups: one cross-thread sum, not two), as one explicit fma (run_sums)."""
    return tl.fma(dx_lo, sums_lo, dx_hi * sums_hi)


@triton.jit
def glu(g, u, alpha, limit, ACT: tl.constexpr):
    """The gated activation of gate g and up u: silu(g) u (ACT 0), or gpt-oss's
    min(g, limit) sigmoid(alpha min(g, limit)) (clamp(u, -limit, limit) + 1) (ACT 1)."""
    if ACT == 0:
        return g / (1.0 + tl.exp(-g)) * u
    else:
        g = tl.minimum(g, limit)
        u = tl.minimum(tl.maximum(u, -limit), limit)
        return g / (1.0 + tl.exp(-alpha * g)) * (u + 1.0)


@triton.jit
def runs_in_8_bits(x_row, r_lo, r_hi, group_mask, NG: tl.constexpr, HALVES: tl.constexpr):
    """Runs r_lo and r_hi [NG] (load_pairs' two runs of each group of weights) of the float
    row at x_row (a pointer; or [NG, 1, 1, 1] pointers, each group's own row) in 8 bits, the
    bits quantize_activation stores for them: (words [NG, 2, 4] int32, d [NG, 2] float32, the
    sums of q [NG, 2] int32), [:, 0] for r_lo, [:, 1] for r_hi; group_mask [NG] (False: all 0).
    Each value is read once. A run's scale is its group of 32's (runs 2a and 2a + 1): HALVES
    (blocks of 32), r_hi = r_lo + 1 is the other half of r_lo's group; else (K-quants) the
    other half of run r, r ^ 1, is the same run of the neighbouring group of weights (ge ^ 1:
    one bit of the run's place in its super-block), so the maximum is taken over the two
    neighbours (NG even: a split holds whole pairs)."""
    runs = tl.join(r_lo, r_hi)  # [NG, 2]
    values = tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :]  # word, byte
    at = x_row + (runs * 16)[:, :, None, None] + values[None, None, :, :]
    x = tl.load(at, mask=group_mask[:, None, None, None], other=0.0).to(tl.float32)
    run_max = tl.max(tl.max(tl.abs(x), axis=3), axis=2)  # [NG, 2]
    if HALVES:
        amax = tl.broadcast_to(tl.max(run_max, axis=1)[:, None], (NG, 2))
    else:
        pairs = tl.max(tl.reshape(run_max, (NG // 2, 2, 2)), axis=1)  # [NG / 2, lo / hi]
        amax = tl.reshape(tl.broadcast_to(pairs[:, None, :], (NG // 2, 2, 2)), (NG, 2))
    words, sums = rounded_words(x, inverse_scale(amax)[:, :, None, None])
    return words, amax * (1.0 / 127.0), sums


def plane_args(packed) -> tuple[torch.Tensor, ...]:
    """load_pairs' p0..p4 for a PackedWeight of one of the expert formats."""
    p = packed.planes

    def words(plane: torch.Tensor) -> torch.Tensor:
        return plane.reshape(-1).view(torch.int32)

    name = packed.fmt.name
    if name in ("Q4_K", "Q5_K"):
        qs = words(p["qs"])
        return p["d"], p["dmin"], words(p["scales"]), qs, words(p["qh"]) if "qh" in p else qs
    if name == "Q6_K":
        return words(p["ql"]), words(p["qh"]), p["scales"], p["d"], p["d"]
    if name == "Q8_0":
        return p["d"], words(p["qs"]), p["d"], p["d"], p["d"]
    if name == "MXFP4":
        return p["e"], words(p["qs"]), p["e"], p["e"], p["e"]
    return p["d"], words(p["qs"]), p.get("m", p["d"]), p.get("qh", p["d"]), p["d"]
