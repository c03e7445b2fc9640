"""What every GGUF GEMV kernel shares: the multiply-accumulate step and the split-K plan.

Each format's kernel loads a tile of weight codes u[BLOCK_N rows, NG groups, GS weights] (the
groups are the format's scale groups, so scales are loaded once per group, not per weight),
with each group's scale s and offset c, w = u * s - c, and hands them to `mac_codes` with the
input columns those weights multiply:

    one input row (decode):   acc[n, g, i] += (u s - c)[n, g, i] * x[col[g, i]]
                              y[n] = sum acc   (reduced once, after the K loop)
    2..16 rows (drafts):      acc[n, b] += sum_k w[n, k] * x[b, col[k]]   (tl.dot on the
                              dequantized tile, rows padded to 16)

Why the decode path looks like this: a 4-bit GEMV at the H100's 3 TB/s must turn 5e12 codes a
second into floats. The int-to-float instruction runs at 16 per clock per multiprocessor, well
under that, so codes become floats by the exponent trick instead: (u | 0x4B000000) read as a
float is 2^23 + u, and one fma(2^23 + u, s, -2^23 s) gives u s with a single rounding. Per
weight that leaves a nibble extract (integer unit), an FMA, the offset's add and the FMA with
x. (Moving the offset out as c * sum(x) per group cost more: the sums needed shuffles.)

Split-K: a program covers `blocks_per_split` blocks of K; with several splits it writes fp32
partial sums that one torch sum adds up, so small matrices (the 1024-row K/V projections of an
8B model) still start enough programs to fill the GPU. EVEN (shapes that divide into whole
tiles) drops every bounds mask: the masks fold to constants.
"""

from __future__ import annotations

import triton
import triton.language as tl

# super-blocks of 256 weights the integer GEMV's program reads in one step of K (gemv.
# integer_config: a 4096-wide row at once); gemv_dp4a_rows.takes_shape counts longer rows
INTEGER_STEP_BLOCKS = 16

MAGIC = tl.constexpr(0x4B000000)  # the bits of 2.0**23 as float32
TWO_23 = tl.constexpr(8388608.0)


@triton.jit
def codes_to_float(u):
    """int32 codes 0 <= u < 2^23 -> float32(2^23 + u), without the int-to-float unit."""
    return (u | MAGIC).to(tl.float32, bitcast=True)


@triton.jit
def mac_codes(acc, u, s, c, x_ptr, cols, col_mask, zero_rows, stride_xb, n_rows_x,
              BLOCK_B: tl.constexpr, EXACT_FMA: tl.constexpr):  # fmt: skip
    """Accumulate (u * s - c) * x; u [BN, NG, GS/4, 4] codes, s and c [BN, NG] per group."""
    s4 = s[:, :, None, None]
    c4 = c[:, :, None, None]
    if EXACT_FMA:
        w = tl.fma(codes_to_float(u), s4, -TWO_23 * s4) - c4
    else:  # Triton's CPU interpreter rounds fma twice: subtract first there
        w = (codes_to_float(u) - TWO_23) * s4 - c4
    return mac(acc, w, x_ptr, cols, col_mask, zero_rows, stride_xb, n_rows_x, BLOCK_B)


@triton.jit
def mac(acc, w, x_ptr, cols, col_mask, zero_rows, stride_xb, n_rows_x, BLOCK_B: tl.constexpr):
    """acc += w * x for a dequantized tile w [BN, NG, GS/4, 4]; cols [NG, GS/4, 4].

    One input row: x is loaded as a full [BN, ...] tile (zero_rows is 0 of that shape), so it
    gets the weights' own register layout and no shuffle through shared memory."""
    if BLOCK_B == 1:
        x = tl.load(x_ptr + zero_rows + cols[None, :, :, :], mask=col_mask[None, :, :, :],
                    other=0.0)  # fmt: skip
        acc += w * x.to(tl.float32)
    else:
        BN: tl.constexpr = w.shape[0]
        K: tl.constexpr = w.shape[1] * w.shape[2] * w.shape[3]
        flat_cols = tl.reshape(cols, (K,))
        flat_mask = tl.reshape(col_mask, (K,))
        b = tl.arange(0, BLOCK_B)
        xt = tl.load(
            x_ptr + b[None, :] * stride_xb + flat_cols[:, None],
            mask=flat_mask[:, None] & (b[None, :] < n_rows_x),
            other=0.0,
        )
        w2 = tl.reshape(w, (BN, K))
        if xt.dtype == tl.float32:  # float32 inputs get float32 products, not tf32
            acc += tl.dot(w2, xt, input_precision="ieee")
        elif xt.dtype == tl.bfloat16:
            # tf32 keeps more of the weight than bf16 would, at no cost that shows in a
            # memory-bound kernel (and Triton's CPU interpreter gets bf16 dots wrong).
            acc += tl.dot(w2, xt.to(tl.float32))
        else:
            acc += tl.dot(w2.to(xt.dtype), xt)
    return acc


@triton.jit
def lanes(GS: tl.constexpr):
    """Offsets 0..GS-1 of a group as [GS/4, 4]: runs of 4 contiguous values, the widest that
    the uint8 codes and the f16 inputs share (so both get one register layout)."""
    return tl.arange(0, GS // 4)[:, None] * 4 + tl.arange(0, 4)[None, :]


@triton.jit
def new_acc(BLOCK_N: tl.constexpr, NG: tl.constexpr, GS: tl.constexpr, BLOCK_B: tl.constexpr):
    if BLOCK_B == 1:
        acc = tl.zeros((BLOCK_N, NG, GS // 4, 4), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
    return acc


@triton.jit
def store_acc(acc, out_ptr, rows, row_mask, stride_ob, stride_split, n_rows_x,
              BLOCK_B: tl.constexpr):  # fmt: skip
    """out[split, b, n] (fp32 partials) or out[b, n] (final, in out's dtype); out_ptr and
    n_rows_x already moved to this program's first input row (see `program_tile`)."""
    split = tl.program_id(1)
    base = out_ptr + split * stride_split
    if BLOCK_B == 1:
        y = tl.sum(tl.sum(tl.sum(acc, axis=3), axis=2), axis=1)
        tl.store(base + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)
    else:
        b = tl.arange(0, BLOCK_B)
        ptrs = base + b[None, :] * stride_ob + rows[:, None]
        mask = row_mask[:, None] & (b[None, :] < n_rows_x)
        tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def program_tile(x_ptr, out_ptr, stride_xb, stride_ob, n_rows_x, N, blocks_per_split,
                 BLOCK_N: tl.constexpr, BLOCK_B: tl.constexpr, EVEN: tl.constexpr):  # fmt: skip
    """This program's tile: x and out moved to its input rows (grid axis 2 tiles the batch),
    its weight rows (axis 0) with their mask, a zero per row to broadcast x's loads over
    them, and its first block (axis 1 splits the row)."""
    first_x = tl.program_id(2) * BLOCK_B
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    zero_rows = (rows * 0)[:, None, None, None]
    first = tl.program_id(1) * blocks_per_split
    return (x_ptr + first_x * stride_xb, out_ptr + first_x * stride_ob, n_rows_x - first_x,
            rows, row_mask, zero_rows, first)  # fmt: skip


@triton.jit
def block_step(first, t, group_block, NB, blocks_per_split, rows, row_mask,
               EVEN: tl.constexpr):  # fmt: skip
    """The blocks of one loop step (`group_block`: each group's block within the step), which
    of them exist, that mask with the rows', and each (row, block)'s index."""
    blk = first + t + group_block
    group_mask = ((blk < NB) & (t + group_block < blocks_per_split)) | EVEN
    mask2 = row_mask[:, None] & group_mask[None, :]
    row_blk = rows[:, None] * NB + blk[None, :]
    return blk, group_mask, mask2, row_blk


def split_plan(n_blocks: int, blocks_per_tile: int, n_row_tiles: int, n_sm: int) -> tuple[int, int]:
    """(blocks per split, number of splits): enough programs for about 4 waves of the GPU,
    but never a split shorter than two tiles (the partial sums cost a pass of their own)."""
    tiles = triton.cdiv(n_blocks, blocks_per_tile)
    wanted = max(1, (4 * n_sm) // max(1, n_row_tiles))
    splits = max(1, min(wanted, tiles // 2))
    tiles_per_split = triton.cdiv(tiles, splits)
    blocks_per_split = tiles_per_split * blocks_per_tile
    return blocks_per_split, triton.cdiv(n_blocks, blocks_per_split)


def whole_steps(n_blocks: int, most: int) -> int:
    """Super-blocks a step for a row of n_blocks: the largest power of two up to `most` that
    divides it (no step half empty: Llama-3-8B's 14336-wide rows, 56 super-blocks, go in 7
    steps of 8, not 4 of 16 with the last half masked), unless that is under most / 2."""
    step = most
    while n_blocks % step and step > max(1, most // 2):
        step //= 2
    return step if n_blocks % step == 0 else most


@triton.jit
def finish_rows(y, out_ptr, part_ptr, count_ptr, tile, split, b, rows, row_mask, stride_ob, N,
                n_rows_x, n_splits, SPLIT_K: tl.constexpr):  # fmt: skip
    """Write y [BN] (input row b, weight rows `rows`) to out, in one launch also with split-K;
    `tile` numbers the (weight row tile, input row) pair, `split` the part of K summed in y.

    With split-K each program stores its fp32 partial in part[split, b, n] and takes a ticket
    from its tile's counter; the last of the tile's n_splits programs to arrive adds the
    partials up in split order, writes out in out's dtype and resets the counter for the next
    call. (The barrier orders all of the program's stores before its ticket; the atomic is
    acq_rel at GPU scope and the partials are read past L1, so the last program sees every
    other program's partial.) This saves the separate sum kernel: a launch per GEMV."""
    out = out_ptr + b * stride_ob + rows
    if SPLIT_K:
        part = part_ptr + b * N + rows
        tile_stride = n_rows_x * N
        tl.store(part + split * tile_stride, y, mask=row_mask)
        tl.debug_barrier()
        ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if ticket == n_splits - 1:
            total = tl.zeros_like(y)
            for j in range(0, n_splits):
                total += tl.load(part + j * tile_stride, mask=row_mask, other=0.0,
                                 cache_modifier=".cg")  # fmt: skip
            tl.store(out, total.to(out_ptr.dtype.element_ty), mask=row_mask)
            tl.atomic_xchg(count_ptr + tile, 0)
    else:
        tl.store(out, y.to(out_ptr.dtype.element_ty), mask=row_mask)


# Loads of a [BN rows, G groups, ...] tile whose offsets are a row part plus a group part
# (gemv_dp4a's weight planes, and x broadcast over the rows: a row part of 0). RIT ("rows in
# the thread"): the pointers are built as [G, BN, ...] and the loaded tile permuted back, so
# that Triton's coalescing (3.6: threads along the first dimension after the contiguous one,
# then warps along the next) puts threads along the groups and keeps a group's words and
# several of its rows in each thread: x's words, the same for every row, are then loaded and
# held once per thread, not once per row, and a group's sums stay in the thread. Else the
# plain [BN, G, ...] load.
@triton.jit
def load_words(ptr, row_off, col_off, row_mask, col_mask, RIT: tl.constexpr):
    """ptr[row_off[n] + col_off[g, h, j]] as [BN, G, H, J], masked by row_mask[n] & col_mask[g]
    (0 where masked)."""
    if RIT:
        mask = col_mask[:, None, None, None] & row_mask[None, :, None, None]
        tile = tl.load(ptr + col_off[:, None, :, :] + row_off[None, :, None, None], mask=mask,
                       other=0)  # fmt: skip
        return tl.permute(tile, (1, 0, 2, 3))
    else:
        mask = row_mask[:, None, None, None] & col_mask[None, :, None, None]
        return tl.load(ptr + row_off[:, None, None, None] + col_off[None], mask=mask, other=0)


@triton.jit
def load_runs(ptr, row_off, col_off, row_mask, col_mask, RIT: tl.constexpr):
    """ptr[row_off[n] + col_off[g, h]] as [BN, G, H] (masked as load_words)."""
    if RIT:
        mask = col_mask[:, None, None] & row_mask[None, :, None]
        tile = tl.load(ptr + col_off[:, None, :] + row_off[None, :, None], mask=mask, other=0)
        return tl.permute(tile, (1, 0, 2))
    else:
        mask = row_mask[:, None, None] & col_mask[None, :, None]
        return tl.load(ptr + row_off[:, None, None] + col_off[None], mask=mask, other=0)


@triton.jit
def load_groups(ptr, row_off, col_off, row_mask, col_mask, RIT: tl.constexpr):
    """ptr[row_off[n] + col_off[g]] as [BN, G] (masked as load_words)."""
    if RIT:
        mask = col_mask[:, None] & row_mask[None, :]
        tile = tl.load(ptr + col_off[:, None] + row_off[None, :], mask=mask, other=0)
        return tl.permute(tile, (1, 0))
    else:
        mask = row_mask[:, None] & col_mask[None, :]
        return tl.load(ptr + row_off[:, None] + col_off[None, :], mask=mask, other=0)
