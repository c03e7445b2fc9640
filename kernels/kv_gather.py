"""Stored KV pages back to f16 rows on the device, dequantized and unrotated: what a prefill
chunk attends to (torch's SDPA over them, kv_cache.PagedKVCache.attend_prefill).

    row = dequantize(fmt, stored)              (kv_formats.py)
    row = R^T row = signs * (H row) / sqrt(D)  for the rotated formats (H symmetric)

One program per (page of the sequence, KV head); rows come out as [positions, heads, D]. A
page the block table does not hold (-1: a view's table read past the sequence it shows,
PagedKVCache.new_view) comes out as zeros: its positions are past every query's, masked.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.kv_kivi import load_kivi_tile, load_open_tile
from kernels.kv_tiles import KIVI4, ROT2, ROT4, fwht, load_tile


@triton.jit
def kv_gather_kernel(
    block_table_ptr, out_ptr, q_ptr, scale_ptr, min_ptr, signs_ptr, n_rows,
    open_ptr, open_page_ptr, slot, role, use_open,
    HKV: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr, P: tl.constexpr,
    FMT: tl.constexpr, KG: tl.constexpr = 32,
):  # fmt: skip
    """use_open (1 in a kivi4 cache): the sequence's open page (open_page[slot]) from its f16
    rows of `role` (0 K, 1 V), the other pages as stored."""
    pg = tl.program_id(0)
    head = tl.program_id(1)
    held = tl.load(block_table_ptr + pg)
    page = tl.maximum(held, 0)  # a page not held is read from page 0 and zeroed below
    j = tl.arange(0, D)
    if (use_open != 0) & (pg == tl.load(open_page_ptr + slot)):
        rows = load_open_tile(slot, role, head, open_ptr, HKV, P, D).to(tl.float32)
    else:
        if FMT == KIVI4:
            rows = load_kivi_tile(page, head, q_ptr, scale_ptr, min_ptr, HKV, P, D, KG)
        else:
            tile, row_scale = load_tile((page * HKV + head) * P, q_ptr, scale_ptr, min_ptr,
                                        FMT, P, D)  # fmt: skip
            rows = tile.to(tl.float32) * row_scale[:, None]
        if (FMT == ROT4) | (FMT == ROT2):  # stored rotated: rotate back (signs / sqrt(D))
            rows = fwht(rows, P, D, LOG2D) * tl.load(signs_ptr + j)[None, :]
    rows = tl.where(held >= 0, rows, 0.0)  # no page: zeros, whatever the load read
    position = pg * P + tl.arange(0, P)
    target = out_ptr + (position[:, None] * HKV + head) * D + j[None, :]
    tl.store(target, rows.to(tl.float16), mask=(position < n_rows)[:, None])
