"""GEMV / small GEMM over ggml's 32-weight blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and plain
F16/BF16/F32.

    Q4_0: w = d * (q - 8)        q 4-bit; byte i of a block holds weights i (low nibble) and
    Q4_1: w = d * q + m          i + 16 (high nibble)
    Q5_0: w = d * (q - 16)       q 5-bit: the nibbles as above, fifth bits in the 32-bit qh
    Q5_1: w = d * q + m          (bit i for weight i)
    Q8_0: w = d * q              q int8
    F16 / BF16 / F32: w as stored.

One group is one block (its d and m loaded once); the float kernel's groups are runs of 64
columns, masked at the row's end so any row length works. Oracle: gguf.quants.dequantize.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.gemv_common import block_step, lanes, mac, mac_codes, new_acc, program_tile, store_acc


@triton.jit
def block32_kernel(
    x_ptr, out_ptr, d_ptr, m_ptr, qs_ptr, qh_ptr,
    N, NB, n_rows_x, stride_xb, stride_ob, stride_split, blocks_per_split,
    QS_BYTES: tl.constexpr, HAS_MIN: tl.constexpr, HAS_QH: tl.constexpr,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, BLOCK_B: tl.constexpr,
    EVEN: tl.constexpr, EXACT_FMA: tl.constexpr,
):  # fmt: skip
    """QS_BYTES 16: Q4/Q5 (two nibbles a byte); 32: Q8_0, whose qs are read as uint8: q + 128
    = the byte with its top bit flipped, offset c = 128 d."""
    x_ptr, out_ptr, n_rows_x, rows, row_mask, zero_rows, first = program_tile(
        x_ptr, out_ptr, stride_xb, stride_ob, n_rows_x, N, blocks_per_split, BLOCK_N, BLOCK_B, EVEN
    )
    g = tl.arange(0, NBLK)
    lane = lanes(QS_BYTES)
    acc = new_acc(BLOCK_N, NBLK, QS_BYTES, BLOCK_B)
    for t in range(0, blocks_per_split, NBLK):
        blk, group_mask, mask2, row_blk = block_step(
            first, t, g, NB, blocks_per_split, rows, row_mask, EVEN
        )
        qs = tl.load(
            qs_ptr + (row_blk * QS_BYTES)[:, :, None, None] + lane[None, None, :, :],
            mask=mask2[:, :, None, None],
            other=0,
        )
        d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        codes = qs.to(tl.int32)  # widen once: each nibble is then one integer op
        cols = (blk * 32)[:, None, None] + lane[None, :, :]
        col_mask = group_mask[:, None, None] & (lane[None, :, :] < QS_BYTES)
        if QS_BYTES == 32:
            acc = mac_codes(acc, codes ^ 128, d, 128.0 * d, x_ptr, cols, col_mask, zero_rows,
                            stride_xb, n_rows_x, BLOCK_B, EXACT_FMA)  # fmt: skip
        else:
            u_lo = codes & 15
            u_hi = codes >> 4
            if HAS_QH:
                qh = tl.load(qh_ptr + row_blk, mask=mask2, other=0)[:, :, None, None]
                u_lo = u_lo | (((qh >> lane[None, None, :, :]) & 1) << 4)
                u_hi = u_hi | (((qh >> (lane[None, None, :, :] + 16)) & 1) << 4)
            if HAS_MIN:  # w = d q + m
                offset = -tl.load(m_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
            else:  # w = d (q - 8), or d (q - 16) with the fifth bit
                offset = d * (16.0 if HAS_QH else 8.0)
            acc = mac_codes(acc, u_lo, d, offset, x_ptr, cols, col_mask, zero_rows,
                            stride_xb, n_rows_x, BLOCK_B, EXACT_FMA)  # fmt: skip
            acc = mac_codes(acc, u_hi, d, offset, x_ptr, cols + 16, col_mask, zero_rows,
                            stride_xb, n_rows_x, BLOCK_B, EXACT_FMA)  # fmt: skip
    store_acc(acc, out_ptr, rows, row_mask, stride_ob, stride_split, n_rows_x, BLOCK_B)


@triton.jit
def float_kernel(
    x_ptr, out_ptr, w_ptr,
    N, K, n_rows_x, stride_xb, stride_ob, stride_split, blocks_per_split,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, BLOCK_B: tl.constexpr, EVEN: tl.constexpr,
):  # fmt: skip
    """`blocks` here are runs of 64 columns; K need not be a multiple of 64."""
    x_ptr, out_ptr, n_rows_x, rows, row_mask, zero_rows, first = program_tile(
        x_ptr, out_ptr, stride_xb, stride_ob, n_rows_x, N, blocks_per_split, BLOCK_N, BLOCK_B, EVEN
    )
    g = tl.arange(0, NBLK)
    lane = lanes(64)
    acc = new_acc(BLOCK_N, NBLK, 64, BLOCK_B)
    for t in range(0, blocks_per_split, NBLK):
        run = first + t + g
        cols = (run * 64)[:, None, None] + lane[None, :, :]
        col_mask = (cols < K) & ((t + g) < blocks_per_split)[:, None, None]
        w = tl.load(
            w_ptr + (rows * K)[:, None, None, None] + cols[None, :, :, :],
            mask=row_mask[:, None, None, None] & col_mask[None, :, :, :],
            other=0.0,
        ).to(tl.float32)
        acc = mac(acc, w, x_ptr, cols, col_mask, zero_rows, stride_xb, n_rows_x, BLOCK_B)
    store_acc(acc, out_ptr, rows, row_mask, stride_ob, stride_split, n_rows_x, BLOCK_B)


def launch_block32(w, x, out, grid, plan, cfg):
    """Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0."""
    p = w.planes
    q8 = w.fmt.name == "Q8_0"
    block32_kernel[grid](
        x, out, p["d"], p.get("m", p["d"]), p["qs"].view(torch.uint8), p.get("qh", p["qs"]),
        w.n_out, w.n_in // 32, x.shape[0], x.stride(0), out.stride(-2), plan.stride_split,
        plan.blocks_per_split, QS_BYTES=32 if q8 else 16, HAS_MIN="m" in p, HAS_QH="qh" in p,
        BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile, BLOCK_B=cfg.block_b, EVEN=plan.even,
        EXACT_FMA=plan.exact_fma, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


def launch_float(w, x, out, grid, plan, cfg):
    float_kernel[grid](
        x, out, w.planes["w"],
        w.n_out, w.n_in, x.shape[0], x.stride(0), out.stride(-2), plan.stride_split,
        plan.blocks_per_split, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile,
        BLOCK_B=cfg.block_b, EVEN=plan.even_rows, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )  # fmt: skip
