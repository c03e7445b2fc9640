"""kivi4 keys (kv_formats.py has the math): sealing a page once full, the open page, and reading
sealed pages in attention and the gather.

A kivi4 page is quantized per channel over its positions, so it cannot be quantized row by
row as they come (nor per group of 32 positions, which would make the residual below a
group, not a page). Each sequence has one open page per layer (its `open` slot, [2, HKV, P, D]
f16: K and V): the page of its last written position, "being filled or just filled". Its
rows stay there exact, and attention reads that page's keys and values from it (KIVI's
residual, for K and V: keeping V's newest rows exact as well took SmolLM2's KL from 0.0068 to
0.0040, docs/hearth-engine.md); every earlier key page is sealed: codes [P, D/2] (two 4-bit
codes a byte, dims 2i and 2i+1 as rot4), scale and min [P/G, D] f16 per (page, head): one
row per group of G positions, even channels first (stored_channel). V is stored
in its own format as always (rot4, q8, f16), row by row; the open page only adds an exact copy
(unrotated) of the newest rows.

Writing n rows at consecutive positions first .. last (kv_write_kernel puts them as f16, K
after RoPE, into a scratch [2, n + P, HKV, D] whose row r is position first - first % P + r,
or for n = 1 straight into the open page):

    kivi_seal_kernel   each page whose last slot is in first .. last: rows before `first` from
                       the open page, the rest from the scratch; per channel
                       mn = min, s = (max - mn) / 15, c = round((k - mn) / s) per group of G
                       positions; codes, s, mn.
    kivi_open_kernel   (n > 1) the open rows before `first` into the scratch (so it holds the
                       exact rows of every page the write touched: attend_prefill reads them),
                       then the rows of last's page into the open page.

The open page's number (the page index in the sequence) is kept on the device per slot, so
attention, the gather and a truncation know which page to read from it with no host copy.
Truncating to n positions reopens page (n - 1) // P: if it is not the open one it is sealed
(every page before the open one is), and its dequantized rows become the open rows (they stay
as quantized once; the key page is sealed again, from those, when it fills).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.kv_tiles import ROT4, _round_codes, fwht, load_tile
from kernels.launch import gdc_launch_dependents, gdc_wait
from kernels.nibbles import rot4_codes_f16


@triton.jit
def _first_position(positions_ptr, start, POSITIONS: tl.constexpr):
    if POSITIONS:
        return tl.load(positions_ptr).to(tl.int32)
    else:
        return start


@triton.jit
def stored_channel(channel, D: tl.constexpr):
    """Where a sealed page's scale and min rows keep a channel's value: the even channels
    first, then the odd ones (kv_formats.kivi_channel_order)."""
    return (channel % 2) * (D // 2) + channel // 2


@triton.jit
def open_rows(open_ptr, slot, role, head, HKV: tl.constexpr, P: tl.constexpr, D: tl.constexpr):
    """Pointers [P, D] to the open page's rows: role 0 keys, 1 values."""
    s = tl.arange(0, P)
    j = tl.arange(0, D)
    return open_ptr + (((slot * 2 + role) * HKV + head) * P + s)[:, None] * D + j[None, :]


@triton.jit
def kivi_seal_kernel(
    scratch_ptr, open_ptr, block_table_ptr, positions_ptr, start, n_rows, table_pages, slot,
    q_ptr, scale_ptr, min_ptr,
    HKV: tl.constexpr, D: tl.constexpr, P: tl.constexpr, G: tl.constexpr,
    POSITIONS: tl.constexpr, SCRATCH: tl.constexpr, ROWS: tl.constexpr = False,
    GDC: tl.constexpr = False,
):  # fmt: skip
    """Grid (pages a write of n_rows can touch, HKV). SCRATCH: the write's rows come from the
    scratch (its K half); else (n = 1) the open page already holds all. ROWS: grid (rows, HKV)
    after a batch's one-row writes (kv_write_kernel's SLOT_PER_ROW): row t at positions[t],
    moved into its block table among the stacked ones, in the open page of slot[t] (`slot`
    points to them); n_rows is 1. GDC (sm_90+, a dependent launch): the launch after it (the
    attention, which waits for this one to end) may start at once, and this one reads the
    write's rows only after the write has ended."""
    if GDC:
        gdc_launch_dependents()
        gdc_wait()
    if ROWS:
        row = tl.program_id(0)
        first = tl.load(positions_ptr + row).to(tl.int32)
        open_slot = tl.load(slot + row)
        pg = first // P
    else:
        first = _first_position(positions_ptr, start, POSITIONS)
        open_slot = slot
        pg = first // P + tl.program_id(0)
    last = first + n_rows - 1
    head = tl.program_id(1)
    page_end = pg * P + P - 1
    if (first >= 0) & (page_end >= first) & (page_end <= last) & (pg < table_pages):
        page = tl.load(block_table_ptr + pg)
        if page >= 0:  # -1: a page not grown, nothing written
            s = tl.arange(0, P)
            j = tl.arange(0, D)
            keys = open_rows(open_ptr, open_slot, 0, head, HKV, P, D)
            if SCRATCH:
                base = first - first % P  # the scratch's row 0
                scratch = scratch_ptr + ((pg * P - base + s) * HKV + head)[:, None] * D
                earlier = (pg * P + s < first)[:, None]
                x = tl.where(
                    earlier,
                    tl.load(keys, mask=earlier, other=0.0),
                    tl.load(scratch + j[None, :], mask=~earlier, other=0.0),
                )
            else:
                x = tl.load(keys)
            x = tl.reshape(x.to(tl.float32), (P // G, G, D))
            lo = tl.min(x, axis=1).to(tl.float16)
            scale = ((tl.max(x, axis=1) - lo.to(tl.float32)) / 15.0).to(tl.float16)
            q = _round_codes(x, lo.to(tl.float32)[:, None, :], scale.to(tl.float32)[:, None, :],
                             15.0)  # fmt: skip
            even, odd = tl.split(tl.reshape(q, (P, D // 2, 2)))
            i = tl.arange(0, D // 2)
            row0 = (page * HKV + head) * P
            tl.store(q_ptr + (row0 + s)[:, None] * (D // 2) + i[None, :], even | (odd << 4))
            groups = ((page * HKV + head) * (P // G) + tl.arange(0, P // G))[:, None] * D
            stored = stored_channel(j, D)[None, :]
            tl.store(scale_ptr + groups + stored, scale)
            tl.store(min_ptr + groups + stored, lo)


@triton.jit
def kivi_open_kernel(
    scratch_ptr, scratch_len, open_ptr, open_page_ptr, positions_ptr, start, n_rows, slot,
    HKV: tl.constexpr, D: tl.constexpr, P: tl.constexpr, POSITIONS: tl.constexpr,
):  # fmt: skip
    """Grid (HKV,), after the seal kernel: for K and V, the open rows before `first` (of the
    page the write began in) into the scratch, then the rows of last's page into the open
    page, which becomes that page."""
    first = _first_position(positions_ptr, start, POSITIONS)
    last = first + n_rows - 1
    head = tl.program_id(0)
    s = tl.arange(0, P)
    j = tl.arange(0, D)
    base = first - first % P
    earlier = (s < first % P)[:, None]
    pg = last // P
    written = (pg * P + s >= first)[:, None] & (pg * P + s <= last)[:, None]
    for role in tl.static_range(2):
        half = scratch_ptr + role * scratch_len * HKV * D
        rows = open_rows(open_ptr, slot, role, head, HKV, P, D)
        tl.store(half + ((s * HKV + head) * D)[:, None] + j[None, :],
                 tl.load(rows, mask=earlier), mask=earlier)  # fmt: skip
        tl.debug_barrier()  # those open rows are read before the new ones overwrite them
        new = half + (((pg * P - base + s) * HKV + head) * D)[:, None] + j[None, :]
        tl.store(rows, tl.load(new, mask=written), mask=written)
    if head == 0:
        tl.store(open_page_ptr + slot, pg)


@triton.jit
def kivi_reopen_kernel(
    open_ptr, open_page_ptr, block_table_ptr, slot, pg, q_ptr, scale_ptr, min_ptr,
    vq_ptr, vs_ptr, vm_ptr, signs_ptr,
    HKV: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr, P: tl.constexpr, G: tl.constexpr,
    V_FMT: tl.constexpr,
):  # fmt: skip
    """Grid (HKV,): page pg (sealed, since it precedes the open page) dequantized into the
    open page, K and V (V unrotated), unless it is the open page already. The caller then
    sets open_page[slot] = pg (after this launch: a program here storing it would race the
    others' check)."""
    head = tl.program_id(0)
    if tl.load(open_page_ptr + slot) != pg:
        page = tl.load(block_table_ptr + pg)
        keys = load_kivi_tile(page, head, q_ptr, scale_ptr, min_ptr, HKV, P, D, G)
        tl.store(open_rows(open_ptr, slot, 0, head, HKV, P, D), keys.to(tl.float16))
        tile, row_scale = load_tile((page * HKV + head) * P, vq_ptr, vs_ptr, vm_ptr, V_FMT, P, D)
        values = tile.to(tl.float32) * row_scale[:, None]
        if V_FMT == ROT4:  # rotated back (signs_ptr holds signs / sqrt(D))
            values = fwht(values, P, D, LOG2D) * tl.load(signs_ptr + tl.arange(0, D))[None, :]
        tl.store(open_rows(open_ptr, slot, 1, head, HKV, P, D), values.to(tl.float16))


@triton.jit
def load_kivi_tile(page, head, q_ptr, scale_ptr, min_ptr, HKV: tl.constexpr, P: tl.constexpr,
                   D: tl.constexpr, G: tl.constexpr):  # fmt: skip
    """A sealed page's rows [P, D], dequantized in f32: c * s + mn per group and channel."""
    row0 = (page * HKV + head) * P
    i = tl.arange(0, D // 2)
    b = tl.load(q_ptr + (row0 + tl.arange(0, P))[:, None] * (D // 2) + i[None, :])
    groups = ((page * HKV + head) * (P // G) + tl.arange(0, P // G))[:, None] * D
    stored = stored_channel(tl.arange(0, D), D)[None, :]
    scale = tl.load(scale_ptr + groups + stored).to(tl.float32)[:, None, :]
    lo = tl.load(min_ptr + groups + stored).to(tl.float32)[:, None, :]
    codes = tl.reshape(tl.join(b & 15, b >> 4), (P // G, G, D)).to(tl.float32)
    return tl.reshape(codes * scale + lo, (P, D))


@triton.jit
def kivi_page_scores(q_even, q_odd, page, head, q_ptr, scale_ptr, min_ptr,
                     HKV: tl.constexpr, P: tl.constexpr, D: tl.constexpr, G: tl.constexpr,
                     ASM: tl.constexpr):  # fmt: skip
    """Scores [rows, P] of queries against a sealed page, the query (f16, already scaled) as
    its even and odd dims: the codes dequantized in f16 by one multiply-add each with their
    group's and channel's scale and min (c * s + mn, as rot4's halves but with the scale of
    a channel over G positions, not of a group of a row), then two dots. The page's scale and
    min rows are stored even channels first (stored_channel), so each half's [P/G, D/2] is a
    run of its own, and broadcast over their G positions, so the key tiles stay 2-D (reshaped
    from [P/G, G, D/2] they cost 8 barriers a page step under Triton 3.6:
    docs/decisions/0011-attention-flat-tiles.md). Interleaved, each pair of f16 scales the
    multiply-adds take cost two byte permutes (docs/decisions/2026-11-30-kivi4-key-reads.md).

    (Scaling the query per page instead, q.k = sum_d (q_d s_d) c_d + sum_d q_d mn_d, saves
    those multiply-adds but moved the scaled query into the dot's layout at every page:
    docs/decisions/0011-attention-flat-tiles.md.)"""
    row0 = (page * HKV + head) * P
    i = tl.arange(0, D // 2)
    b = tl.load(q_ptr + (row0 + tl.arange(0, P))[:, None] * (D // 2) + i[None, :])
    c_even, c_odd = rot4_codes_f16(b, ASM)
    # each group's even channels, then its odd ones (stored_channel): one run per half
    even = ((page * HKV + head) * (P // G) + tl.arange(0, P // G))[:, None] * D + i[None, :]
    s_even = tl.load(scale_ptr + even)
    s_odd = tl.load(scale_ptr + even + D // 2)
    m_even = tl.load(min_ptr + even)
    m_odd = tl.load(min_ptr + even + D // 2)
    k_even = tl.fma(c_even, _over_positions(s_even, P, G, D), _over_positions(m_even, P, G, D))
    k_odd = tl.fma(c_odd, _over_positions(s_odd, P, G, D), _over_positions(m_odd, P, G, D))
    return tl.dot(q_odd, tl.trans(k_odd), tl.dot(q_even, tl.trans(k_even)))


@triton.jit
def _over_positions(rows, P: tl.constexpr, G: tl.constexpr, D: tl.constexpr):
    """Per-group rows [P/G, D/2] as a tile [P, D/2]: each group's row over its G positions."""
    return tl.reshape(tl.broadcast_to(rows[:, None, :], (P // G, G, D // 2)), (P, D // 2))


@triton.jit
def load_open_tile(slot, role, head, open_ptr, HKV: tl.constexpr, P: tl.constexpr,
                   D: tl.constexpr):  # fmt: skip
    """The open page's keys (role 0) or values (1) [P, D] f16 (slots not written yet hold
    older rows: masked by position by the caller)."""
    return tl.load(open_rows(open_ptr, slot, role, head, HKV, P, D))
