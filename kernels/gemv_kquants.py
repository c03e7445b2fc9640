"""GEMV / small GEMM over ggml's K-quant super-blocks (256 weights): Q4_K, Q5_K, Q6_K.

    y[b, n] = sum_k x[b, k] * w[n, k], w dequantized in registers from the planes of
    PackedWeight (ggml_formats.py), never written out.

Q4_K / Q5_K: per super-block f16 d and dmin, eight 6-bit (scale, min) pairs packed in 12 bytes,
    w = d * sc[j] * q - dmin * m[j] for sub-block j of 32 weights, q 4-bit (Q5_K: plus a fifth
    bit from qh). The 128 quant bytes hold sub-blocks (2c, 2c+1) of chunk c as the low and high
    nibbles of bytes 32c..32c+31, so the kernel's groups are (block, chunk) pairs and one byte
    load feeds two sub-blocks.
Q6_K: f16 d, sixteen int8 scales (one per 16 weights), w = d * sc * (q - 32), q = 4 low bits
    from ql and 2 high bits from qh; groups are (block, half, 16-weight run).

In the terms of gemv_common.mac_codes: Q4_K/Q5_K s = d sc, c = dmin m; Q6_K s = d sc, c = 32 s.
The math is ggml's (dequantize_row_q4_K etc.); the oracle is gguf.quants.dequantize.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.gemv_common import block_step, lanes, mac_codes, new_acc, program_tile, store_acc


@triton.jit
def scale_min_k4(base, j, mask):
    """The 6-bit scale and min of sub-block j from a 12-byte `scales` field (getscale_min_k4)."""
    low = j < 4
    b_j = tl.load(base + j, mask=mask, other=0)
    b_j4 = tl.load(base + j + 4, mask=mask, other=0)
    b_jm4 = tl.load(base + tl.where(low, j, j - 4), mask=mask, other=0)
    sc = tl.where(low, b_j & 63, (b_j4 & 15) | ((b_jm4 >> 6) << 4))
    m = tl.where(low, b_j4 & 63, (b_j4 >> 4) | ((b_j >> 6) << 4))
    return sc.to(tl.float32), m.to(tl.float32)


@triton.jit
def q4_k_q5_k_kernel(
    x_ptr, out_ptr, d_ptr, dmin_ptr, scales_ptr, qs_ptr, qh_ptr,
    N, NB, n_rows_x, stride_xb, stride_ob, stride_split, blocks_per_split,
    HAS_QH: tl.constexpr, BLOCK_N: tl.constexpr, NBLK: tl.constexpr, BLOCK_B: tl.constexpr,
    EVEN: tl.constexpr, EXACT_FMA: tl.constexpr,
):  # fmt: skip
    x_ptr, out_ptr, n_rows_x, rows, row_mask, zero_rows, first = program_tile(
        x_ptr, out_ptr, stride_xb, stride_ob, n_rows_x, N, blocks_per_split, BLOCK_N, BLOCK_B, EVEN
    )
    NG: tl.constexpr = NBLK * 4
    g = tl.arange(0, NG)
    lane = lanes(32)
    chunk = g % 4
    acc = new_acc(BLOCK_N, NG, 32, BLOCK_B)
    for t in range(0, blocks_per_split, NBLK):
        blk, group_mask, mask2, row_blk = block_step(
            first, t, g // 4, NB, blocks_per_split, rows, row_mask, EVEN
        )
        mask3 = mask2[:, :, None, None]
        qs = tl.load(
            qs_ptr
            + (row_blk * 128 + chunk[None, :] * 32)[:, :, None, None]
            + lane[None, None, :, :],
            mask=mask3,
            other=0,
        )
        d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        dmin = tl.load(dmin_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        scale_base = scales_ptr + row_blk * 12
        sc_lo, m_lo = scale_min_k4(scale_base, 2 * chunk[None, :], mask2)
        sc_hi, m_hi = scale_min_k4(scale_base, 2 * chunk[None, :] + 1, mask2)
        codes = qs.to(tl.int32)  # widen once: each nibble is then one integer op
        u_lo = codes & 15
        u_hi = codes >> 4
        if HAS_QH:
            qh = tl.load(
                qh_ptr + (row_blk * 32)[:, :, None, None] + lane[None, None, :, :],
                mask=mask3,
                other=0,
            ).to(tl.int32)
            shift = (2 * chunk)[None, :, None, None]
            u_lo = u_lo | (((qh >> shift) & 1) << 4)
            u_hi = u_hi | (((qh >> (shift + 1)) & 1) << 4)
        cols = (blk * 256 + chunk * 64)[:, None, None] + lane[None, :, :]
        col_mask = group_mask[:, None, None] & (lane[None, :, :] < 32)
        acc = mac_codes(acc, u_lo, d * sc_lo, dmin * m_lo, x_ptr, cols, col_mask, zero_rows,
                        stride_xb, n_rows_x, BLOCK_B, EXACT_FMA)  # fmt: skip
        acc = mac_codes(acc, u_hi, d * sc_hi, dmin * m_hi, x_ptr, cols + 32, col_mask,
                        zero_rows, stride_xb, n_rows_x, BLOCK_B, EXACT_FMA)  # fmt: skip
    store_acc(acc, out_ptr, rows, row_mask, stride_ob, stride_split, n_rows_x, BLOCK_B)


@triton.jit
def q6_k_kernel(
    x_ptr, out_ptr, ql_ptr, qh_ptr, scales_ptr, d_ptr,
    N, NB, n_rows_x, stride_xb, stride_ob, stride_split, blocks_per_split,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, BLOCK_B: tl.constexpr,
    EVEN: tl.constexpr, EXACT_FMA: tl.constexpr,
):  # fmt: skip
    x_ptr, out_ptr, n_rows_x, rows, row_mask, zero_rows, first = program_tile(
        x_ptr, out_ptr, stride_xb, stride_ob, n_rows_x, N, blocks_per_split, BLOCK_N, BLOCK_B, EVEN
    )
    NG: tl.constexpr = NBLK * 4
    g = tl.arange(0, NG)
    lane = lanes(16)
    half = (g // 2) % 2  # 128-weight half of the super-block
    run = g % 2  # which 16 of the half's 32 ql/qh positions
    acc = new_acc(BLOCK_N, NG, 16, BLOCK_B)
    for t in range(0, blocks_per_split, NBLK):
        blk, group_mask, mask2, row_blk = block_step(
            first, t, g // 4, NB, blocks_per_split, rows, row_mask, EVEN
        )
        mask3 = mask2[:, :, None, None]
        pos = (half * 32 + run * 16)[None, :]  # [1, NG]
        qh = tl.load(
            qh_ptr + (row_blk * 64 + pos)[:, :, None, None] + lane[None, None, :, :],
            mask=mask3,
            other=0,
        ).to(tl.int32)
        d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
        scale_idx = row_blk * 16 + (half * 8 + run)[None, :]
        col0 = blk * 256 + half * 128 + run * 16
        col_mask = group_mask[:, None, None] & (lane[None, :, :] < 16)
        for j in tl.static_range(2):
            ql = tl.load(
                ql_ptr
                + (row_blk * 128 + pos + half[None, :] * 32 + 32 * j)[:, :, None, None]
                + lane[None, None, :, :],
                mask=mask3,
                other=0,
            ).to(tl.int32)
            s_a = d * tl.load(scales_ptr + scale_idx + 2 * j, mask=mask2, other=0).to(tl.float32)
            s_b = d * tl.load(scales_ptr + scale_idx + 2 * j + 4, mask=mask2, other=0).to(
                tl.float32
            )
            u_a = (ql & 15) | (((qh >> (2 * j)) & 3) << 4)
            u_b = (ql >> 4) | (((qh >> (2 * j + 4)) & 3) << 4)
            cols = (col0 + 32 * j)[:, None, None] + lane[None, :, :]
            acc = mac_codes(acc, u_a, s_a, 32.0 * s_a, x_ptr, cols, col_mask, zero_rows,
                                     stride_xb, n_rows_x, BLOCK_B, EXACT_FMA)  # fmt: skip
            acc = mac_codes(acc, u_b, s_b, 32.0 * s_b, x_ptr, cols + 64,
                                     col_mask, zero_rows, stride_xb, n_rows_x, BLOCK_B,
                                     EXACT_FMA)  # fmt: skip
    store_acc(acc, out_ptr, rows, row_mask, stride_ob, stride_split, n_rows_x, BLOCK_B)


def launch_q4_k_q5_k(w, x, out, grid, plan, cfg):
    p = w.planes
    has_qh = "qh" in p
    q4_k_q5_k_kernel[grid](
        x, out, p["d"], p["dmin"], p["scales"], p["qs"], p["qh"] if has_qh else p["qs"],
        w.n_out, w.n_in // 256, x.shape[0], x.stride(0), out.stride(-2), plan.stride_split,
        plan.blocks_per_split, HAS_QH=has_qh, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile,
        BLOCK_B=cfg.block_b, EVEN=plan.even, EXACT_FMA=plan.exact_fma,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


def launch_q6_k(w, x, out, grid, plan, cfg):
    p = w.planes
    q6_k_kernel[grid](
        x, out, p["ql"], p["qh"], p["scales"], p["d"],
        w.n_out, w.n_in // 256, x.shape[0], x.stride(0), out.stride(-2), plan.stride_split,
        plan.blocks_per_split, BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile,
        BLOCK_B=cfg.block_b, EVEN=plan.even, EXACT_FMA=plan.exact_fma,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
