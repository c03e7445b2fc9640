"""The KV cache's write path: new K and V rows -> (RoPE on K) -> rotation for rot formats ->
quantize -> store in their pages, one launch for K and V of all heads.

    k' = RoPE(k, pos)                          when a Rope is given
    stored = quantize(fmt, R k' if rot else k')  (kv_formats.py has the formats)

kivi4 K is quantized a page at a time (kv_kivi.py): here its rows (and V's, beside V's own
format) are only stored as f16, into the write's scratch (then kivi_seal_kernel and
kivi_open_kernel run), or for a single row straight into the sequence's open page (then only
the seal kernel, at a page's last slot).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.kv_tiles import KIVI4, ROT2, ROT4, rotate_rows, store_rows
from kernels.launch import gdc_launch_dependents
from kernels.rope import rope_rows


@triton.jit
def kv_write_kernel(
    k_ptr, v_ptr, block_table_ptr, start, positions_ptr, table_pages, stride_kt, stride_vt,
    signs_ptr, inv_freq_ptr, mscale,
    kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, vm_ptr, open_ptr, open_page_ptr, slot, scratch_len,
    HKV: tl.constexpr, HKV_PAD: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr,
    P: tl.constexpr, K_FMT: tl.constexpr, V_FMT: tl.constexpr,
    ROPE: tl.constexpr, N_ROT: tl.constexpr, NEOX: tl.constexpr, POSITIONS: tl.constexpr,
    KIVI_DIRECT: tl.constexpr = False, LAUNCH_DEPENDENTS: tl.constexpr = False,
):  # fmt: skip
    """Row t goes to position positions[t] (POSITIONS: read on the device, so a CUDA graph
    can replay the write at the next position) or start + t. A position past the block table
    writes nothing rather than into another sequence's page. kivi4 K: kq_ptr is the scratch
    [2, scratch_len, HKV, D] (K and V as written, row r at position first - first % P + r);
    KIVI_DIRECT (one row): the open page [2, HKV, P, D] of `slot` instead. V is also stored
    in its own format, as for any K format. LAUNCH_DEPENDENTS (Hopper; AttentionTuning.
    chain_launches): the next launch may start now; the attention's split kernel, launched as a
    dependent, waits in-kernel for this grid to finish before it reads anything."""
    if LAUNCH_DEPENDENTS:
        gdc_launch_dependents()
    t = tl.program_id(0)
    pos = tl.load(positions_ptr + t).to(tl.int32) if POSITIONS else start + t
    in_table = (pos >= 0) & (pos // P < table_pages)
    page = tl.load(block_table_ptr + pos // P, mask=in_table, other=-1)
    in_table = in_table & (page >= 0)  # -1: a page not grown
    heads = tl.arange(0, HKV_PAD)
    head_mask = (heads < HKV) & in_table
    rows = (page * HKV + heads) * P + pos % P
    j = tl.arange(0, D)
    signs = tl.load(signs_ptr + j)
    k_rows = k_ptr + t * stride_kt + heads * D
    if ROPE:
        k = rope_rows(k_rows, head_mask, pos, inv_freq_ptr, mscale, D, N_ROT, NEOX)
    else:
        k = tl.load(k_rows[:, None] + j[None, :], mask=head_mask[:, None], other=0.0)
        k = k.to(tl.float32)
    v_rows = v_ptr + t * stride_vt + heads[:, None] * D
    v = tl.load(v_rows + j[None, :], mask=head_mask[:, None], other=0.0)
    v = v.to(tl.float32)
    if K_FMT == KIVI4:
        if KIVI_DIRECT:
            key_rows = ((slot * 2) * HKV + heads) * P + pos % P
            value_rows = key_rows + HKV * P
            mask = head_mask[:, None]
            tl.store(open_ptr + key_rows[:, None] * D + j[None, :], k.to(tl.float16), mask=mask)
            tl.store(open_ptr + value_rows[:, None] * D + j[None, :], v.to(tl.float16), mask=mask)
            tl.store(open_page_ptr + slot, pos // P, mask=in_table)
        else:
            first = tl.load(positions_ptr).to(tl.int32) if POSITIONS else start
            key_rows = (pos - first + first % P) * HKV + heads
            value_rows = key_rows + scratch_len * HKV
            mask = (heads < HKV)[:, None]
            tl.store(kq_ptr + key_rows[:, None] * D + j[None, :], k.to(tl.float16), mask=mask)
            tl.store(kq_ptr + value_rows[:, None] * D + j[None, :], v.to(tl.float16), mask=mask)
    else:
        if (K_FMT == ROT4) | (K_FMT == ROT2):  # keys stored rotated
            k = rotate_rows(k, signs, HKV_PAD, D, LOG2D)
        store_rows(k, rows, head_mask, kq_ptr, ks_ptr, km_ptr, K_FMT, HKV_PAD, D)
    if V_FMT == ROT4:
        v = rotate_rows(v, signs, HKV_PAD, D, LOG2D)
    store_rows(v, rows, head_mask, vq_ptr, vs_ptr, vm_ptr, V_FMT, HKV_PAD, D)
