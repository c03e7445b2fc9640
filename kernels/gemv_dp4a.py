"""Integer GEMV for 1..few input rows over Q4_K and Q6_K: 8-bit activations and dp4a (MMVQ).

    y[b, n] = sum over sub-blocks j of  d * sc_j * dx_j * sum_k q[n, k] xq[b, k]  (-  offsets)

x is quantized per 32 values inside the kernel (act_quant.py: int8 words, scale dx, sums), the
weight planes are read as int32 words, and each word's codes meet the matching x word in one
`dp4a` (4 multiply-adds). Why: the float path (gemv_kquants.py) spends about 8.5 instructions
per weight turning nibbles into floats and is instruction-bound at 42-46% of the copy rate;
here a word of Q4_K codes costs two logic ops and two dp4a for 8 weights.

Q4_K: a 32-bit word at byte 32c + 4i of qs holds the low nibbles of weights 64c + 4i..4i+3
    (sub-block 2c) and the high nibbles of weights 64c + 32 + 4i.. (sub-block 2c + 1), so
    `w & 0x0F0F0F0F` and `(w >> 4) & 0x0F0F0F0F` meet x words 16c + i and 16c + 8 + i as they
    are. w = d sc q - dmin m gives, per sub-block, d sc dx sum(q xq) - dmin m dx sum(xq). The 12
    bytes of 6-bit scales are decoded from 3 words, as ggml's get_scale_min_k4 on 4 at a time.
Q6_K: per 128-weight half h, words i of ql (bytes 64h + 4i and 64h + 32 + 4i) and of qh (32h +
    4i) give 4 words of 6-bit codes: (ql & 0x0F0F0F0F) | ((qh << 4) & 0x30303030) and the like,
    for weights 128h + 32 quarter + 4i. w = d sc (q - 32) gives, per run of 16,
    d sc dx (sum(q xq) - 32 sum(xq)), all integer up to the last multiply.

The weight bytes are the GGUF bytes in PackedWeight's planes, unchanged. Tile: BLOCK_N weight
rows x NBLK super-blocks a K step, every one of BLOCK_B input rows per program; split-K with the
reduction in the same launch (gemv_common.finish_rows) so 1024-row matrices still fill the GPU.
Several input rows: one per program, grid axis 0 = (weight row tile, input row) with the input
row fastest, so the programs that read the same weight tile run together and all but the first
find it in L2 (one axis: axis 0 has room for a 262,144-row vocabulary matrix, y and z do not).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.act_quant import dp4a, quantize_activation, x_words
from kernels.gemv_common import finish_rows

LOW_NIBBLES = tl.constexpr(0x0F0F0F0F)


@triton.jit
def _q4_k_scales_mins(scales_ptr, row_blk, chunk, mask):
    """(sc, m) of sub-blocks 2c and 2c + 1 of each (row, block), loaded from its 12 scale bytes."""
    base = scales_ptr + row_blk * 3
    s0 = tl.load(base, mask=mask, other=0)
    s1 = tl.load(base + 1, mask=mask, other=0)
    s2 = tl.load(base + 2, mask=mask, other=0)
    return q4_k_scales_from_words(s0, s1, s2, chunk)


@triton.jit
def q4_k_scales_from_words(s0, s1, s2, chunk):
    """(sc, m) of sub-blocks 2c and 2c + 1 from the 12 scale bytes as 3 int32 words s0..s2
    (ggml's get_scale_min_k4, four sub-blocks per operation)."""
    upper = chunk >= 2  # sub-blocks 4..7: low 4 bits in s2, top 2 bits in s0 / s1's bits 6..7
    sc4 = tl.where(upper, (s2 & LOW_NIBBLES) | ((s0 >> 2) & 0x30303030), s0 & 0x3F3F3F3F)
    m4 = tl.where(upper, ((s2 >> 4) & LOW_NIBBLES) | ((s1 >> 2) & 0x30303030), s1 & 0x3F3F3F3F)
    shift = (chunk % 2) * 16
    sc_lo = ((sc4 >> shift) & 0xFF).to(tl.float32)
    sc_hi = ((sc4 >> (shift + 8)) & 0xFF).to(tl.float32)
    m_lo = ((m4 >> shift) & 0xFF).to(tl.float32)
    m_hi = ((m4 >> (shift + 8)) & 0xFF).to(tl.float32)
    return sc_lo, sc_hi, m_lo, m_hi


@triton.jit
def dot_words(w, xw, ASM: tl.constexpr):
    """sum over the last two axes of dp4a(w [BN, G, S, 4], xw [1, G, S, 4]) -> [BN, G]"""
    return tl.sum(tl.sum(dp4a(w, xw, tl.zeros_like(w), ASM), axis=3), axis=2)


@triton.jit
def q4_k_dp4a_kernel(
    x_ptr, xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, d_ptr, dmin_ptr, scales_ptr,
    qs_ptr, N, NB, n_rows_x, stride_xb, stride_ob, blocks_per_split, n_splits,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    PREQ: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """One input row per program (the grid: module docstring). qs_ptr and scales_ptr are the
    planes as int32 words; d, dmin f16."""
    b = tl.program_id(0) % n_rows_x
    x_row = x_ptr + b * stride_xb
    xq_row, xd_row, xs_row = xq_ptr + b * NB * 64, xd_ptr + b * NB * 8, xs_ptr + b * NB * 16
    rows = tl.program_id(0) // n_rows_x * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    NG: tl.constexpr = NBLK * 4  # groups: (super-block, chunk of 64 weights)
    g = tl.arange(0, NG)
    chunk = g % 4
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]  # [2, 4]
    acc = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
    first = tl.program_id(1) * blocks_per_split
    for t in range(0, blocks_per_split, NBLK):
        blk = first + t + g // 4
        group_mask = ((blk < NB) & (t + g // 4 < blocks_per_split)) | EVEN
        mask2 = row_mask[:, None] & group_mask[None, :]
        row_blk = rows[:, None] * NB + blk[None, :]
        qs = tl.load(qs_ptr + (row_blk * 32 + chunk[None, :] * 8)[:, :, None, None] + word,
                     mask=mask2[:, :, None, None], other=0)  # fmt: skip
        d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        dmin = tl.load(dmin_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        sc_lo, sc_hi, m_lo, m_hi = _q4_k_scales_mins(scales_ptr, row_blk, chunk[None, :], mask2)
        base = blk * 64 + chunk * 16
        x_lo, dx_lo, isum_lo = x_words(x_row, xq_row, xd_row, xs_row, base, group_mask, rows,
                                       PREQ)  # fmt: skip
        x_hi, dx_hi, isum_hi = x_words(x_row, xq_row, xd_row, xs_row, base + 8, group_mask,
                                       rows, PREQ)  # fmt: skip
        sum_lo = dx_lo * tl.sum(isum_lo, axis=2).to(tl.float32)  # sum of x' over sub-block
        sum_hi = dx_hi * tl.sum(isum_hi, axis=2).to(tl.float32)
        dot_lo = dot_words(qs & LOW_NIBBLES, x_lo, ASM)
        dot_hi = dot_words((qs >> 4) & LOW_NIBBLES, x_hi, ASM)
        scaled = (sc_lo * dx_lo) * dot_lo.to(tl.float32) + (sc_hi * dx_hi) * dot_hi.to(tl.float32)
        acc += d * scaled - dmin * (m_lo * sum_lo + m_hi * sum_hi)
    y = tl.sum(acc, axis=1)
    finish_rows(y, out_ptr, part_ptr, count_ptr, b, rows, row_mask, stride_ob, N, n_rows_x,
                n_splits, SPLIT_K)  # fmt: skip


@triton.jit
def q6_k_dp4a_kernel(
    x_ptr, xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, ql_ptr, qh_ptr, scales_ptr,
    d_ptr, N, NB, n_rows_x, stride_xb, stride_ob, blocks_per_split, n_splits,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    PREQ: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """One input row per program (the grid: module docstring). ql_ptr and qh_ptr are the
    planes as int32 words; scales int8, d f16."""
    b = tl.program_id(0) % n_rows_x
    x_row = x_ptr + b * stride_xb
    xq_row, xd_row, xs_row = xq_ptr + b * NB * 64, xd_ptr + b * NB * 8, xs_ptr + b * NB * 16
    rows = tl.program_id(0) // n_rows_x * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    NG: tl.constexpr = NBLK * 2  # groups: (super-block, half of 128 weights)
    g = tl.arange(0, NG)
    half = g % 2
    run = tl.arange(0, 2)  # which 16 of a quarter's 32 weights (one scale each)
    word = run[:, None] * 4 + tl.arange(0, 4)[None, :]  # [2, 4]
    acc = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
    first = tl.program_id(1) * blocks_per_split
    for t in range(0, blocks_per_split, NBLK):
        blk = first + t + g // 2
        group_mask = ((blk < NB) & (t + g // 2 < blocks_per_split)) | EVEN
        mask2 = row_mask[:, None] & group_mask[None, :]
        mask4 = mask2[:, :, None, None]
        row_blk = rows[:, None] * NB + blk[None, :]
        ql_words = (row_blk * 32 + half[None, :] * 16)[:, :, None, None] + word
        ql_a = tl.load(ql_ptr + ql_words, mask=mask4, other=0)
        ql_b = tl.load(ql_ptr + ql_words + 8, mask=mask4, other=0)
        qh = tl.load(qh_ptr + (row_blk * 16 + half[None, :] * 8)[:, :, None, None] + word,
                     mask=mask4, other=0)  # fmt: skip
        d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        scale_idx = (row_blk * 16 + half[None, :] * 8)[:, :, None] + run[None, None, :]
        base = blk * 64 + half * 32
        total = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
        for quarter in tl.static_range(4):
            # the 4 quarters of a half: low / high nibbles of ql_a / ql_b, qh bits 2*quarter..
            if quarter % 2 == 0:  # noqa: SIM108 (a static if; Triton's ternary is not one)
                ql = ql_a
            else:
                ql = ql_b
            if quarter >= 2:
                ql = ql >> 4
            codes = (ql & LOW_NIBBLES) | (((qh >> (2 * quarter)) << 4) & 0x30303030)
            xq, dx, isum = x_words(x_row, xq_row, xd_row, xs_row, base + 8 * quarter, group_mask,
                                   rows, PREQ)  # fmt: skip
            dot = tl.sum(dp4a(codes, xq, tl.zeros_like(codes), ASM), axis=3)  # [BN, NG, 2]
            sc = tl.load(scales_ptr + scale_idx + 2 * quarter, mask=mask2[:, :, None], other=0)
            runs = (dot - 32 * isum) * sc.to(tl.int32)
            total += dx * tl.sum(runs, axis=2).to(tl.float32)
        acc += d * total
    y = tl.sum(acc, axis=1)
    finish_rows(y, out_ptr, part_ptr, count_ptr, b, rows, row_mask, stride_ob, N, n_rows_x,
                n_splits, SPLIT_K)  # fmt: skip


def words(plane: torch.Tensor) -> torch.Tensor:
    """A uint8 plane (rows of whole 4-byte words) read as int32 words."""
    return plane.view(-1).view(torch.int32)


def x_buffers(x, xq, cfg):
    """(words, d, sums) of x: `xq` when the caller quantized x already, else one launch of
    quantize_activation; x itself thrice (unused) when each program quantizes x itself."""
    if not cfg.prequantize:
        return x, x, x
    xq = xq or quantize_activation(x, let_next_start=cfg.pipelined)
    return xq.words, xq.scales, xq.sums


def launch_q4_k(w, x, xq, out, part, count, grid, plan, cfg):
    p = w.planes
    q4_k_dp4a_kernel[grid](
        x, *x_buffers(x, xq, cfg), out, part, count, p["d"], p["dmin"], words(p["scales"]),
        words(p["qs"]),
        w.n_out, w.n_in // 256, x.shape[0], x.stride(0), out.stride(0), plan.blocks_per_split,
        plan.splits, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile,
        EVEN=plan.even, SPLIT_K=plan.splits > 1, PREQ=cfg.prequantize, ASM=plan.native,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


def launch_q6_k(w, x, xq, out, part, count, grid, plan, cfg):
    p = w.planes
    q6_k_dp4a_kernel[grid](
        x, *x_buffers(x, xq, cfg), out, part, count, words(p["ql"]), words(p["qh"]), p["scales"],
        p["d"],
        w.n_out, w.n_in // 256, x.shape[0], x.stride(0), out.stride(0), plan.blocks_per_split,
        plan.splits, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile,
        EVEN=plan.even, SPLIT_K=plan.splits > 1, PREQ=cfg.prequantize, ASM=plan.native,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
