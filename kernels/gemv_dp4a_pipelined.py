"""The dp4a GEMV (gemv_dp4a.py) with its weight loads pipelined by hand, an experiment not yet
measured on a GPU (GemvConfig(pipelined=True); not the default).

Why: Triton does not software-pipeline the plain loads of gemv_dp4a.py's K loop (its SASS has
LDG, no LDGSTS), so each K step waits a memory latency. Here each step's weight planes are
loaded one step ahead, the first before the loop, and on sm_90+ the kernel is a programmatic
dependent launch: it may start while the kernel before it (the activation's quantization)
still runs, streams its first weights, and waits (griddepcontrol.wait) before it reads x or
writes anything. Same math, planes and grid as gemv_dp4a.py, whose kernels stay as measured.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.act_quant import dp4a, has_griddepcontrol, x_words
from kernels.gemv_common import finish_rows, gdc_launch_dependents, gdc_wait
from kernels.gemv_dp4a import LOW_NIBBLES, dot_words, q4_k_scales_from_words, words, x_buffers


@triton.jit
def _q4_k_load(d_ptr, dmin_ptr, scales_ptr, qs_ptr, rows, row_mask, blk, group_mask, NB):
    """One K step's Q4_K planes for weight rows x groups (super-block blk, chunk g % 4):
    qs words [BN, G, 2, 4], d and dmin [BN, G] f32, scale words s0..s2 [BN, G]."""
    chunk = tl.arange(0, blk.shape[0]) % 4
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    mask2 = row_mask[:, None] & group_mask[None, :]
    row_blk = rows[:, None] * NB + blk[None, :]
    qs = tl.load(qs_ptr + (row_blk * 32 + chunk[None, :] * 8)[:, :, None, None] + word,
                 mask=mask2[:, :, None, None], other=0)  # fmt: skip
    d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
    dmin = tl.load(dmin_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
    s0 = tl.load(scales_ptr + row_blk * 3, mask=mask2, other=0)
    s1 = tl.load(scales_ptr + row_blk * 3 + 1, mask=mask2, other=0)
    s2 = tl.load(scales_ptr + row_blk * 3 + 2, mask=mask2, other=0)
    return qs, d, dmin, s0, s1, s2


@triton.jit
def _q4_k_mac(acc, qs, d, dmin, s0, s1, s2, blk, group_mask, rows, x_row, xq_row, xd_row, xs_row,
              PREQ: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """acc [BN, G] += one K step of d sc dx sum(q xq) - dmin m dx sum(xq), per sub-block."""
    chunk = tl.arange(0, blk.shape[0]) % 4
    sc_lo, sc_hi, m_lo, m_hi = q4_k_scales_from_words(s0, s1, s2, chunk[None, :])
    base = blk * 64 + chunk * 16
    x_lo, dx_lo, isum_lo = x_words(x_row, xq_row, xd_row, xs_row, base, group_mask, rows, PREQ)
    x_hi, dx_hi, isum_hi = x_words(x_row, xq_row, xd_row, xs_row, base + 8, group_mask, rows,
                                   PREQ)  # fmt: skip
    sum_lo = dx_lo * tl.sum(isum_lo, axis=2).to(tl.float32)  # sum of x' over the sub-block
    sum_hi = dx_hi * tl.sum(isum_hi, axis=2).to(tl.float32)
    dot_lo = dot_words(qs & LOW_NIBBLES, x_lo, ASM)
    dot_hi = dot_words((qs >> 4) & LOW_NIBBLES, x_hi, ASM)
    scaled = (sc_lo * dx_lo) * dot_lo.to(tl.float32) + (sc_hi * dx_hi) * dot_hi.to(tl.float32)
    return acc + d * scaled - dmin * (m_lo * sum_lo + m_hi * sum_hi)


@triton.jit
def q4_k_dp4a_pipelined_kernel(
    x_ptr, xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, d_ptr, dmin_ptr, scales_ptr,
    qs_ptr, N, NB, n_rows_x, stride_xb, stride_ob, blocks_per_split, n_splits,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    PREQ: tl.constexpr, ONE_STEP: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """gemv_dp4a.q4_k_dp4a_kernel with step t+1's weights loaded while step t computes, and
    (GDC) griddepcontrol.wait between the first weights and the first read of x."""
    b = tl.program_id(0) % n_rows_x
    x_row = x_ptr + b * stride_xb
    xq_row, xd_row, xs_row = xq_ptr + b * NB * 64, xd_ptr + b * NB * 8, xs_ptr + b * NB * 16
    rows = tl.program_id(0) // n_rows_x * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    NG: tl.constexpr = NBLK * 4  # groups: (super-block, chunk of 64 weights)
    g = tl.arange(0, NG)
    acc = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
    first = tl.program_id(1) * blocks_per_split
    ahead = (first + g // 4 < NB) & (g // 4 < blocks_per_split)
    qs, d, dmin, s0, s1, s2 = _q4_k_load(d_ptr, dmin_ptr, scales_ptr, qs_ptr, rows, row_mask,
                                         first + g // 4, ahead, NB)  # fmt: skip
    if GDC:
        gdc_wait()
    if ONE_STEP:  # the split is one step (a 4096-wide row at NBLK=16): nothing to prefetch
        group_mask = ahead | EVEN
        acc = _q4_k_mac(acc, qs, d, dmin, s0, s1, s2, first + g // 4, group_mask, rows, x_row,
                        xq_row, xd_row, xs_row, PREQ, ASM)  # fmt: skip
    else:
        for t in range(0, blocks_per_split, NBLK):
            blk = first + t + g // 4
            group_mask = ((blk < NB) & (t + g // 4 < blocks_per_split)) | EVEN
            ahead = (blk + NBLK < NB) & (t + NBLK + g // 4 < blocks_per_split)  # never EVEN
            qs_n, d_n, dmin_n, s0_n, s1_n, s2_n = _q4_k_load(
                d_ptr, dmin_ptr, scales_ptr, qs_ptr, rows, row_mask, blk + NBLK, ahead, NB
            )
            acc = _q4_k_mac(acc, qs, d, dmin, s0, s1, s2, blk, group_mask, rows, x_row, xq_row,
                            xd_row, xs_row, PREQ, ASM)  # fmt: skip
            qs, d, dmin, s0, s1, s2 = qs_n, d_n, dmin_n, s0_n, s1_n, s2_n
    if GDC:
        gdc_launch_dependents()
    y = tl.sum(acc, axis=1)
    finish_rows(y, out_ptr, part_ptr, count_ptr, b, rows, row_mask, stride_ob, N, n_rows_x,
                n_splits, SPLIT_K)  # fmt: skip


@triton.jit
def _q6_k_load(ql_ptr, qh_ptr, sc_words_ptr, d_ptr, rows, row_mask, blk, group_mask, NB):
    """One K step's Q6_K planes for weight rows x groups (super-block blk, half g % 2): ql
    words of the half's two 32-byte runs, qh words [BN, G, 2, 4], d [BN, G] f32, and the
    half's 8 int8 scales as 2 words [BN, G] (read only by the pipelined path)."""
    half = tl.arange(0, blk.shape[0]) % 2
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    mask2 = row_mask[:, None] & group_mask[None, :]
    mask4 = mask2[:, :, None, None]
    row_blk = rows[:, None] * NB + blk[None, :]
    ql_words = (row_blk * 32 + half[None, :] * 16)[:, :, None, None] + word
    ql_a = tl.load(ql_ptr + ql_words, mask=mask4, other=0)
    ql_b = tl.load(ql_ptr + ql_words + 8, mask=mask4, other=0)
    qh = tl.load(qh_ptr + (row_blk * 16 + half[None, :] * 8)[:, :, None, None] + word,
                 mask=mask4, other=0)  # fmt: skip
    d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
    sw0 = tl.load(sc_words_ptr + row_blk * 4 + half[None, :] * 2, mask=mask2, other=0)
    sw1 = tl.load(sc_words_ptr + row_blk * 4 + half[None, :] * 2 + 1, mask=mask2, other=0)
    return ql_a, ql_b, qh, d, sw0, sw1


@triton.jit
def _q6_k_mac(acc, ql_a, ql_b, qh, d, sw0, sw1, blk, group_mask, rows, x_row, xq_row, xd_row,
              xs_row, PREQ: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """acc [BN, G] += one K step of d sc dx (sum(q xq) - 32 sum(xq)), per run of 16."""
    half = tl.arange(0, blk.shape[0]) % 2
    run = tl.arange(0, 2)  # which 16 of a quarter's 32 weights (one scale each)
    base = blk * 64 + half * 32
    total = tl.zeros(acc.shape, dtype=tl.float32)
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
        # scales 8h + 2 quarter + run: bytes 2 (quarter % 2) + run of word quarter // 2
        if quarter < 2:  # noqa: SIM108 (a static if)
            sw = sw0
        else:
            sw = sw1
        shift = 24 - 8 * (2 * (quarter % 2) + run)
        sc = (sw[:, :, None] << shift[None, None, :]) >> 24  # sign-extended int8
        runs = (dot - 32 * isum) * sc
        total += dx * tl.sum(runs, axis=2).to(tl.float32)
    return acc + d * total


@triton.jit
def q6_k_dp4a_pipelined_kernel(
    x_ptr, xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, ql_ptr, qh_ptr, sc_words_ptr,
    d_ptr, N, NB, n_rows_x, stride_xb, stride_ob, blocks_per_split, n_splits,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    PREQ: tl.constexpr, ONE_STEP: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """gemv_dp4a.q6_k_dp4a_kernel pipelined as q4_k_dp4a_pipelined_kernel; the scales plane
    is read as int32 words (2 per half) so a step's loads are all words."""
    b = tl.program_id(0) % n_rows_x
    x_row = x_ptr + b * stride_xb
    xq_row, xd_row, xs_row = xq_ptr + b * NB * 64, xd_ptr + b * NB * 8, xs_ptr + b * NB * 16
    rows = tl.program_id(0) // n_rows_x * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    NG: tl.constexpr = NBLK * 2  # groups: (super-block, half of 128 weights)
    g = tl.arange(0, NG)
    acc = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
    first = tl.program_id(1) * blocks_per_split
    ahead = (first + g // 2 < NB) & (g // 2 < blocks_per_split)
    ql_a, ql_b, qh, d, sw0, sw1 = _q6_k_load(ql_ptr, qh_ptr, sc_words_ptr, d_ptr, rows, row_mask,
                                             first + g // 2, ahead, NB)  # fmt: skip
    if GDC:
        gdc_wait()
    if ONE_STEP:  # the split is one step (a 4096-wide row at NBLK=16): nothing to prefetch
        group_mask = ahead | EVEN
        acc = _q6_k_mac(acc, ql_a, ql_b, qh, d, sw0, sw1, first + g // 2, group_mask, rows,
                        x_row, xq_row, xd_row, xs_row, PREQ, ASM)  # fmt: skip
    else:
        for t in range(0, blocks_per_split, NBLK):
            blk = first + t + g // 2
            group_mask = ((blk < NB) & (t + g // 2 < blocks_per_split)) | EVEN
            ahead = (blk + NBLK < NB) & (t + NBLK + g // 2 < blocks_per_split)  # never EVEN
            ql_a_n, ql_b_n, qh_n, d_n, sw0_n, sw1_n = _q6_k_load(
                ql_ptr, qh_ptr, sc_words_ptr, d_ptr, rows, row_mask, blk + NBLK, ahead, NB
            )
            acc = _q6_k_mac(acc, ql_a, ql_b, qh, d, sw0, sw1, blk, group_mask, rows, x_row, xq_row,
                            xd_row, xs_row, PREQ, ASM)  # fmt: skip
            ql_a, ql_b, qh, d, sw0, sw1 = ql_a_n, ql_b_n, qh_n, d_n, sw0_n, sw1_n
    if GDC:
        gdc_launch_dependents()
    y = tl.sum(acc, axis=1)
    finish_rows(y, out_ptr, part_ptr, count_ptr, b, rows, row_mask, stride_ob, N, n_rows_x,
                n_splits, SPLIT_K)  # fmt: skip


def _flags(x, cfg, plan) -> dict:
    """ONE_STEP, GDC and ASM, and launch_pdl where the GPU has programmatic dependent launch
    (sm_90+)."""
    gdc = has_griddepcontrol(x.device)
    one_step = plan.blocks_per_split <= cfg.blocks_per_tile
    flags = {"ONE_STEP": one_step, "GDC": gdc, "ASM": plan.native}
    return {**flags, "launch_pdl": True} if gdc else flags


def launch_q4_k(w, x, xq, out, part, count, grid, plan, cfg):
    p = w.planes
    q4_k_dp4a_pipelined_kernel[grid](
        x, *x_buffers(x, xq, cfg), out, part, count, p["d"], p["dmin"], words(p["scales"]),
        words(p["qs"]),
        w.n_out, w.n_in // 256, x.shape[0], x.stride(0), out.stride(0), plan.blocks_per_split,
        plan.splits, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile, EVEN=plan.even,
        SPLIT_K=plan.splits > 1, PREQ=cfg.prequantize, **_flags(x, cfg, plan),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


def launch_q6_k(w, x, xq, out, part, count, grid, plan, cfg):
    p = w.planes
    q6_k_dp4a_pipelined_kernel[grid](
        x, *x_buffers(x, xq, cfg), out, part, count, words(p["ql"]), words(p["qh"]),
        words(p["scales"]), p["d"],
        w.n_out, w.n_in // 256, x.shape[0], x.stride(0), out.stride(0), plan.blocks_per_split,
        plan.splits, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile, EVEN=plan.even,
        SPLIT_K=plan.splits > 1, PREQ=cfg.prequantize, **_flags(x, cfg, plan),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
