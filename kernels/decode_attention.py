"""Decode attention over the paged KV cache (flash-decoding), GQA aware, any K/V formats.

One query per sequence and head; T cached positions. For each KV head, the G = n_heads /
n_kv_heads query heads that share it are one tile [G padded to 16, D], so each K/V page is read
once for the whole group, dequantized in registers, never written out.

    phase 1, grid (sequences, KV heads, splits): each program walks its run of pages:
        s = (q . k) * scale * log2(e)             (q rotated first when K is rotated)
        online softmax: m' = max(m, max s); l = l 2^(m-m') + sum 2^(s-m'); acc likewise
        acc += 2^(s-m') @ v                       (q8: per-row scales folded into s and p)
    phase 2, grid (sequences, KV heads): out = sum_i 2^(m_i-M) acc_i / sum_i 2^(m_i-M) l_i,
        rotated back (R^T) when V is stored rotated.

Splitting the sequence over programs keeps the GPU full at batch 1 (8 KV heads would be 8
programs otherwise): Tri Dao's flash-decoding, FlashInfer's split-K decode.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.kv_tiles import Q8, ROT4, load_tile, rotate_rows, unrotate_rows

LOG2E = 1.4426950408889634


@triton.jit
def decode_split_kernel(
    q_ptr, acc_ptr, m_ptr, l_ptr, block_table_ptr, lengths_ptr, signs_ptr,
    kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, vm_ptr,
    qk_scale, stride_bt, n_splits, pages_per_split,
    HQ: tl.constexpr, HKV: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr,
    D: tl.constexpr, LOG2D: tl.constexpr, P: tl.constexpr,
    K_FMT: tl.constexpr, V_FMT: tl.constexpr,
):  # fmt: skip
    seq = tl.program_id(0)
    head = tl.program_id(1)
    split = tl.program_id(2)
    length = tl.load(lengths_ptr + seq)
    gi = tl.arange(0, G_PAD)
    j = tl.arange(0, D)
    group_mask = gi < G
    q_rows = seq * HQ + head * G + gi
    q = tl.load(q_ptr + q_rows[:, None] * D + j[None, :], mask=group_mask[:, None], other=0.0)
    q = q.to(tl.float32)
    if K_FMT >= ROT4:  # rot4 or rot2: keys stored rotated
        q = rotate_rows(q, tl.load(signs_ptr + j), G_PAD, D, LOG2D)
    q = (q * qk_scale).to(tl.float16)

    m_i = tl.full((G_PAD,), float("-inf"), tl.float32)
    l_i = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D), tl.float32)
    first = split * pages_per_split
    last = tl.minimum(first + pages_per_split, tl.cdiv(length, P))
    for pg in range(first, last):
        page = tl.load(block_table_ptr + seq * stride_bt + pg)
        row0 = (page * HKV + head) * P
        k, k_scale = load_tile(row0, kq_ptr, ks_ptr, km_ptr, K_FMT, P, D)
        s = tl.dot(q, tl.trans(k))
        if K_FMT == Q8:
            s = s * k_scale[None, :]
        tokens = pg * P + tl.arange(0, P)
        s = tl.where(tokens[None, :] < length, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v, v_scale = load_tile(row0, vq_ptr, vs_ptr, vm_ptr, V_FMT, P, D)
        if V_FMT == Q8:
            p = p * v_scale[None, :]
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new

    part = q_rows * n_splits + split
    tl.store(m_ptr + part, m_i, mask=group_mask)
    tl.store(l_ptr + part, l_i, mask=group_mask)
    tl.store(acc_ptr + part[:, None] * D + j[None, :], acc, mask=group_mask[:, None])


@triton.jit
def decode_reduce_kernel(
    acc_ptr, m_ptr, l_ptr, out_ptr, signs_ptr, n_splits,
    HQ: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
    LOG2D: tl.constexpr, V_FMT: tl.constexpr,
):  # fmt: skip
    seq = tl.program_id(0)
    head = tl.program_id(1)
    gi = tl.arange(0, G_PAD)
    j = tl.arange(0, D)
    group_mask = gi < G
    q_rows = seq * HQ + head * G + gi
    m_max = tl.full((G_PAD,), float("-inf"), tl.float32)
    for split in range(n_splits):
        m = tl.load(m_ptr + q_rows * n_splits + split, mask=group_mask, other=float("-inf"))
        m_max = tl.maximum(m_max, m)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)  # padded rows: keep them finite
    total = tl.zeros((G_PAD,), tl.float32)
    out = tl.zeros((G_PAD, D), tl.float32)
    for split in range(n_splits):
        part = q_rows * n_splits + split
        m = tl.load(m_ptr + part, mask=group_mask, other=float("-inf"))
        weight = tl.exp2(m - m_max)
        total += weight * tl.load(l_ptr + part, mask=group_mask, other=0.0)
        acc = tl.load(acc_ptr + part[:, None] * D + j[None, :], mask=group_mask[:, None], other=0.0)
        out += weight[:, None] * acc
    out = out / tl.where(total > 0, total, 1.0)[:, None]
    if V_FMT == ROT4:
        out = unrotate_rows(out, tl.load(signs_ptr + j), G_PAD, D, LOG2D)
    tl.store(out_ptr + q_rows[:, None] * D + j[None, :], out.to(out_ptr.dtype.element_ty),
             mask=group_mask[:, None])  # fmt: skip
