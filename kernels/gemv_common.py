"""What every GGUF GEMV kernel shares: the multiply-accumulate step and the split-K plan.

Each format's kernel dequantizes a tile of weights w[BLOCK_N rows, NG groups, GS weights] in
registers (the groups are the format's scale groups, so a scale is loaded once per group, not
per weight) and hands it to `mac` with the input columns those weights multiply:

    one input row (decode):   acc[n, g, i] += w[n, g, i] * x[col[g, i]]      (FMA, no tensor
                              cores; reduced over (g, i) once, after the K loop)
    2..16 rows (drafts):      acc[n, b] += sum_k w[n, k] * x[b, col[k]]      (tl.dot on the
                              dequantized tile; rows padded to 16)

Split-K: a program covers `blocks_per_split` blocks of K; with several splits it writes fp32
partial sums that one torch sum adds up, so small matrices (the 1024-row K/V projections of an
8B model) still start enough programs to fill the GPU.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def mac(acc, w, x_ptr, cols, col_mask, stride_xb, n_rows_x, BLOCK_B: tl.constexpr):
    if BLOCK_B == 1:
        x = tl.load(x_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        acc += w * x[None, :, :]
    else:
        NG: tl.constexpr = w.shape[1]
        GS: tl.constexpr = w.shape[2]
        flat_cols = tl.reshape(cols, (NG * GS,))
        flat_mask = tl.reshape(col_mask, (NG * GS,))
        b = tl.arange(0, BLOCK_B)
        xt = tl.load(
            x_ptr + b[None, :] * stride_xb + flat_cols[:, None],
            mask=flat_mask[:, None] & (b[None, :] < n_rows_x),
            other=0.0,
        )
        w2 = tl.reshape(w, (w.shape[0], NG * GS))
        if xt.dtype == tl.bfloat16:
            # tf32 keeps more of the weight than bf16 would, at no cost that shows in a
            # memory-bound kernel (and Triton's CPU interpreter gets bf16 dots wrong).
            acc += tl.dot(w2, xt.to(tl.float32))
        else:
            acc += tl.dot(w2.to(xt.dtype), xt)
    return acc


@triton.jit
def new_acc(BLOCK_N: tl.constexpr, NG: tl.constexpr, GS: tl.constexpr, BLOCK_B: tl.constexpr):
    if BLOCK_B == 1:
        acc = tl.zeros((BLOCK_N, NG, GS), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
    return acc


@triton.jit
def store_acc(
    acc, out_ptr, rows, row_mask, stride_ob, stride_split, n_rows_x, BLOCK_B: tl.constexpr
):
    """out[split, b, n] (fp32 partials) or out[b, n] (final, in out's dtype); out_ptr and
    n_rows_x already moved to this program's first input row (see `program_rows`)."""
    split = tl.program_id(1)
    base = out_ptr + split * stride_split
    if BLOCK_B == 1:
        y = tl.sum(tl.sum(acc, axis=2), axis=1)
        tl.store(base + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)
    else:
        b = tl.arange(0, BLOCK_B)
        ptrs = base + b[None, :] * stride_ob + rows[:, None]
        mask = row_mask[:, None] & (b[None, :] < n_rows_x)
        tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def program_rows(x_ptr, out_ptr, stride_xb, stride_ob, n_rows_x, BLOCK_B: tl.constexpr):
    """Move x and out to the input rows of this program (grid axis 2 tiles the batch)."""
    first = tl.program_id(2) * BLOCK_B
    return x_ptr + first * stride_xb, out_ptr + first * stride_ob, n_rows_x - first


def split_plan(n_blocks: int, blocks_per_tile: int, n_row_tiles: int, n_sm: int) -> tuple[int, int]:
    """(blocks per split, number of splits): enough programs for about 4 waves of the GPU,
    but never a split shorter than two tiles (the partial sums cost a pass of their own)."""
    tiles = triton.cdiv(n_blocks, blocks_per_tile)
    wanted = max(1, (4 * n_sm) // max(1, n_row_tiles))
    splits = max(1, min(wanted, tiles // 2))
    tiles_per_split = triton.cdiv(tiles, splits)
    blocks_per_split = tiles_per_split * blocks_per_tile
    return blocks_per_split, triton.cdiv(n_blocks, blocks_per_split)
