"""Triton helpers shared by the KV cache's write and attention kernels: the fast
Walsh-Hadamard transform, and storing / loading rows of each cache format (kv_formats.py has
the math and the numpy reference).

Per layer and per role (K or V) the cache holds pages [n_pages, n_kv_heads, page_size, ...]:
    f16   q [.., D] float16
    q8    q [.., D] int8, scale [..] float16
    rot4  q [.., D/2] uint8 (byte i: dim 2i low nibble, 2i+1 high), scale, min [.., D/32] f16
          interleaved: each row's D/32 scales, then its D/32 mins (one 16-byte run a row at
          D = 128), so that a page's scales and mins load as 16-byte copies past L1
    rot2  q [.., D/4] uint8 (byte i: dims 4i..4i+3 at bits 0, 2, 4, 6), scale, min as rot4
    kivi4 q as rot4, scale and min [n_pages, n_kv_heads, P/G, D] f16 (per group of positions
          and channel, even channels first: kv_kivi.stored_channel), and
          an open page per sequence (kv_kivi.py)
A row is addressed by its index (page * n_kv_heads + head) * page_size + slot.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.nibbles import q8_codes_f16, rot4_codes_f16

F16: tl.constexpr = tl.constexpr(0)
Q8: tl.constexpr = tl.constexpr(1)
ROT4: tl.constexpr = tl.constexpr(2)
ROT2: tl.constexpr = tl.constexpr(3)
KIVI4: tl.constexpr = tl.constexpr(4)  # K only, its own pages and kernels: kv_kivi.py
FORMAT_CODES = {"f16": 0, "q8": 1, "rot4": 2, "rot2": 3, "kivi4": 4}


@triton.jit
def fwht(x, R: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr):
    """x [R, D] @ H_D (unnormalized Sylvester Hadamard): log2(D) butterfly stages."""
    for s in tl.static_range(LOG2D):
        y = tl.permute(tl.reshape(x, (R, D >> (s + 1), 2, 1 << s)), (0, 1, 3, 2))
        a, b = tl.split(y)
        y = tl.permute(tl.join(a + b, a - b), (0, 1, 3, 2))
        x = tl.reshape(y, (R, D))
    return x


@triton.jit
def rotate_rows(x, scaled_signs, R: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr):
    """R x = H (signs * x) / sqrt(D), row by row; scaled_signs = signs / sqrt(D)."""
    return fwht(x * scaled_signs[None, :], R, D, LOG2D)


@triton.jit
def _round_codes(v, lo, scale, levels):
    safe = tl.where(scale > 0, scale, 1.0)
    q = tl.floor((v - lo) / safe + 0.5)
    q = tl.where(scale > 0, q, 0.0)
    return tl.minimum(tl.maximum(q, 0.0), levels).to(tl.uint8)


@triton.jit
def store_rows(x, rows, row_mask, q_ptr, scale_ptr, min_ptr,
               FMT: tl.constexpr, R: tl.constexpr, D: tl.constexpr):  # fmt: skip
    """Quantize rows x [R, D] (f32, already rotated for rot formats) into row indices rows."""
    j = tl.arange(0, D)
    mask = row_mask[:, None]
    if FMT == F16:
        tl.store(q_ptr + rows[:, None] * D + j[None, :], x.to(tl.float16), mask=mask)
    elif FMT == Q8:
        scale = (tl.max(tl.abs(x), axis=1) / 127.0).to(tl.float16)
        s = scale.to(tl.float32)[:, None]
        q = tl.floor(x / tl.where(s > 0, s, 1.0) + 0.5)
        q = tl.minimum(tl.maximum(q, -127.0), 127.0).to(tl.int8)
        tl.store(q_ptr + rows[:, None] * D + j[None, :], q, mask=mask)
        tl.store(scale_ptr + rows, scale, mask=row_mask)
    else:
        LEVELS: tl.constexpr = 15.0 if FMT == ROT4 else 3.0
        NGROUP: tl.constexpr = D // 32
        g = tl.reshape(x, (R, NGROUP, 32))
        lo = tl.min(g, axis=2)
        scale = ((tl.max(g, axis=2) - lo) / LEVELS).to(tl.float16)
        lo = lo.to(tl.float16)
        q = _round_codes(g, lo.to(tl.float32)[:, :, None], scale.to(tl.float32)[:, :, None], LEVELS)
        gi = tl.arange(0, NGROUP)
        # each row's scales, then its mins (min_ptr is scale_ptr + NGROUP: load_scales_mins)
        group_rows = rows[:, None] * (2 * NGROUP) + gi[None, :]
        tl.store(scale_ptr + group_rows, scale, mask=mask)
        tl.store(min_ptr + group_rows, lo, mask=mask)
        if FMT == ROT4:
            even, odd = tl.split(tl.reshape(q, (R, D // 2, 2)))
            packed = even | (odd << 4)
            i = tl.arange(0, D // 2)
            tl.store(q_ptr + rows[:, None] * (D // 2) + i[None, :], packed, mask=mask)
        else:
            even, odd = tl.split(tl.reshape(q, (R, D // 4, 2, 2)))
            d0, d2 = tl.split(even)
            d1, d3 = tl.split(odd)
            packed = d0 | (d1 << 2) | (d2 << 4) | (d3 << 6)
            i = tl.arange(0, D // 4)
            tl.store(q_ptr + rows[:, None] * (D // 4) + i[None, :], packed, mask=mask)


@triton.jit
def nibbles_to_f16(codes):
    """Codes 0..15 (uint8) -> the same values as f16, without the int-to-float unit (a quarter
    of the FMA rate on an H100, which made rot4 attention compute-bound): the f16 with bits
    0x6400 | c is 1024 + c exactly, and subtracting 1024 is exact too."""
    magic = (codes.to(tl.int16) | 0x6400).to(tl.float16, bitcast=True)
    return magic - 1024.0


@triton.jit
def load_scales_mins(t, scale_ptr, NGROUP: tl.constexpr):
    """Rows t's per-group scales and mins [len(t), NGROUP] each, from their interleaved run
    (each row's scales, then its mins): one load of 2 * NGROUP f16 a row, 16 bytes at D = 128,
    which Triton copies with cp.async.cg past L1; the two planes apart were two 8-byte copies a
    row through L1 (cp.async.ca)."""
    c = tl.arange(0, 2 * NGROUP)
    both = tl.load(scale_ptr + t[:, None] * (2 * NGROUP) + c[None, :])
    scale, lo = tl.split(tl.permute(tl.reshape(both, (t.shape[0], 2, NGROUP)), (0, 2, 1)))
    return scale, lo


@triton.jit
def load_tile(row0, q_ptr, scale_ptr, min_ptr,
              FMT: tl.constexpr, P: tl.constexpr, D: tl.constexpr,
              WORDS: tl.constexpr = False, ASM: tl.constexpr = False,
              AT_LOAD: tl.constexpr = False):  # fmt: skip
    """Rows row0 .. row0+P-1 as an f16 tile [P, D] (still rotated for rot formats; q8 codes
    unscaled) and the per-row scale [P] that q8 leaves to the caller (1 otherwise).
    WORDS (attention), ASM, AT_LOAD: q8 codes four bytes at a time, as load_rot4_halves' rot4
    codes; without WORDS (the gather) one byte at a time."""
    t = row0 + tl.arange(0, P)
    if FMT <= Q8:  # f16 or q8: one value per byte or two
        j = tl.arange(0, D)
        tile = tl.load(q_ptr + t[:, None] * D + j[None, :])
        if FMT == Q8:
            # -127..127 as f16 by the exponent trick (nibbles_to_f16): 0x6480 + q is the f16
            # 1152 + q, exactly; no int-to-float conversion
            if WORDS:
                tile = q8_codes_f16(tile, ASM, not AT_LOAD)
            else:
                tile = (tile.to(tl.int16) + 0x6480).to(tl.float16, bitcast=True) - 1152.0
            row_scale = tl.load(scale_ptr + t).to(tl.float32)
        else:
            row_scale = tl.full((P,), 1.0, tl.float32)
    else:
        NGROUP: tl.constexpr = D // 32
        gi = tl.arange(0, NGROUP)
        group_rows = t[:, None] * NGROUP + gi[None, :]
        scale, lo = load_scales_mins(t, scale_ptr, NGROUP)
        scale = scale[:, :, None]
        lo = lo[:, :, None]
        if FMT == ROT4:
            i = tl.arange(0, 16)
            b = tl.load(q_ptr + (group_rows * 16)[:, :, None] + i[None, None, :])
            even = tl.fma(nibbles_to_f16(b & 15), scale, lo)
            odd = tl.fma(nibbles_to_f16(b >> 4), scale, lo)
            tile = tl.reshape(tl.join(even, odd), (P, D))
        else:
            i = tl.arange(0, 8)
            b = tl.load(q_ptr + (group_rows * 8)[:, :, None] + i[None, None, :])
            c0 = tl.fma(nibbles_to_f16(b & 3), scale, lo)
            c1 = tl.fma(nibbles_to_f16((b >> 2) & 3), scale, lo)
            c2 = tl.fma(nibbles_to_f16((b >> 4) & 3), scale, lo)
            c3 = tl.fma(nibbles_to_f16(b >> 6), scale, lo)
            tile = tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), (P, D))
        row_scale = tl.full((P,), 1.0, tl.float32)
    return tile, row_scale


@triton.jit
def load_rot4_halves(row0, q_ptr, scale_ptr, min_ptr, P: tl.constexpr, D: tl.constexpr,
                     ASM: tl.constexpr = False, AT_LOAD: tl.constexpr = False):  # fmt: skip
    """Rows row0 .. row0+P-1 of a rot4 plane as two f16 tiles [P, D/2]: the even dims and the
    odd dims, dequantized in f16 (c * scale + min, one fused multiply-add, rounded once as the
    f16 tile always was). Attention multiplies K and V this way, with two dots each, rather
    than joining the halves into one [P, D] tile: joining costs shuffles, and the joined tile
    as a dot's right operand gave wrong outputs on an H100 under Triton 3.6 (right in the
    interpreter). Codes become f16 four bytes at a time (nibbles.rot4_codes_f16; ASM on a GPU).

    AT_LOAD (V): unpack in the layout the bytes were loaded in, and let the f16 tiles take the
    way to the dot's layout (shared memory, ldmatrix); without it (K) Triton moves that
    conversion onto the bytes, which is right for K (a key row's bytes are a dot operand's
    consecutive pairs) but not for V, whose dot pairs two positions. V's tile is built 2-D
    ([P, D/2] bytes, the scale and min broadcast over their 16 bytes): reshaped from
    [P, D/32, 16], Triton 3.6 stored the f16 tile to shared memory 2 bytes at a time
    (docs/decisions/0011-attention-flat-tiles.md)."""
    t = row0 + tl.arange(0, P)
    NGROUP: tl.constexpr = D // 32
    scale, lo = load_scales_mins(t, scale_ptr, NGROUP)
    if AT_LOAD:
        col = tl.arange(0, D // 2)
        b = tl.load(q_ptr + t[:, None] * (D // 2) + col[None, :])
        scale = tl.reshape(tl.broadcast_to(scale[:, :, None], (P, NGROUP, 16)), (P, D // 2))
        lo = tl.reshape(tl.broadcast_to(lo[:, :, None], (P, NGROUP, 16)), (P, D // 2))
        even, odd = rot4_codes_f16(b, ASM, False)
        even = tl.fma(even, scale, lo)
        odd = tl.fma(odd, scale, lo)
    else:
        # an else, not an early return: the compiler (unlike the interpreter) also builds the
        # statements after a return inside a compile-time branch, with scale reshaped above
        gi = tl.arange(0, NGROUP)
        group_rows = t[:, None] * NGROUP + gi[None, :]
        i = tl.arange(0, 16)
        b = tl.load(q_ptr + (group_rows * 16)[:, :, None] + i[None, None, :])
        even, odd = rot4_codes_f16(b, ASM, True)
        even = tl.reshape(tl.fma(even, scale[:, :, None], lo[:, :, None]), (P, D // 2))
        odd = tl.reshape(tl.fma(odd, scale[:, :, None], lo[:, :, None]), (P, D // 2))
    return even, odd
