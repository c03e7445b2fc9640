"""The KV cache's write path: new K and V rows -> (RoPE on K) -> rotation for rot formats ->
quantize -> store in their pages, one launch for K and V of all heads.

    k' = RoPE(k, pos)                          when a Rope is given
    stored = quantize(fmt, R k' if rot else k')  (kv_formats.py has the formats)
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.kv_tiles import ROT4, rotate_rows, store_rows
from kernels.rope import rope_rows


@triton.jit
def kv_write_kernel(
    k_ptr, v_ptr, block_table_ptr, start, positions_ptr, table_pages, stride_kt, stride_vt,
    signs_ptr, inv_freq_ptr, mscale,
    kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, vm_ptr,
    HKV: tl.constexpr, HKV_PAD: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr,
    P: tl.constexpr, K_FMT: tl.constexpr, V_FMT: tl.constexpr,
    ROPE: tl.constexpr, N_ROT: tl.constexpr, NEOX: tl.constexpr, POSITIONS: tl.constexpr,
):  # fmt: skip
    """Row t goes to position positions[t] (POSITIONS: read on the device, so a CUDA graph
    can replay the write at the next position) or start + t. A position past the block table
    writes nothing rather than into another sequence's page."""
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
    if K_FMT >= ROT4:  # rot4 or rot2: keys stored rotated
        k = rotate_rows(k, signs, HKV_PAD, D, LOG2D)
    store_rows(k, rows, head_mask, kq_ptr, ks_ptr, km_ptr, K_FMT, HKV_PAD, D)
    v_rows = v_ptr + t * stride_vt + heads[:, None] * D
    v = tl.load(v_rows + j[None, :], mask=head_mask[:, None], other=0.0)
    v = v.to(tl.float32)
    if V_FMT == ROT4:
        v = rotate_rows(v, signs, HKV_PAD, D, LOG2D)
    store_rows(v, rows, head_mask, vq_ptr, vs_ptr, vm_ptr, V_FMT, HKV_PAD, D)
