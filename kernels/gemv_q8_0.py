"""The integer GEMV for Q8_0 weights: x in 8 bits per 32 values, each block's 32 codes against
x's 32 in eight dp4a, one float multiply-add a block.

    y[b, n] = sum over blocks j of  d[n, j] dx[b, j] sum_i q[n, 32 j + i] xq[b, 32 j + i]

Q8_0's block is x's group of 32 (act_quant.quantize_activation): its codes are signed bytes
like x's, so the integer sum of a block is exact and only the block's float term rounds. The
float path (gemv_blocks.block32_kernel) dequantizes every weight to a float and multiplies it
with x in floats. gpt-oss-20b's attention and output matrices are Q8_0: their 49 launches took
740 us of a 2.14 ms decode step on an H200, at 41% of the copy rate (docs/measurements/
2026-11-29-s19-call-2/gpt-oss.txt), the step's second cost after the expert GEMV; through this
GEMV, 429 us (docs/decisions/2026-11-29-q8_0-integer-gemv.md). kernels/gemv.py takes it for
Q8_0 at one input row.

A program takes BLOCK_N weight rows of one input row (a program per row: row b of a batch gives
the bits of a one-row call, as speculative checks need) and walks K in steps of NBLK blocks,
the next step's codes and scales loaded at the end of each, and with GDC (a programmatic
dependent launch, sm_90+) the first step's before the wait for x. x's words are loaded in the
weights' layout (each thread the words its codes meet), not broadcast through shared memory;
a block's eight dp4a are summed by tl.sum (its words in one or two threads: no shared memory).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.act_quant import QuantizedActivation, dp4a, quantize_activation
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch


@triton.jit
def _load_step(qs_ptr, d_ptr, rows, row_mask, blk, NB):
    """A step's code words [BN, NBLK, 8] and block scales [BN, NBLK] float32 (0 past the row)."""
    mask = row_mask[:, None] & (blk < NB)[None, :]
    at = rows.to(tl.int64)[:, None] * NB + blk[None, :]
    w = tl.arange(0, 8)
    q = tl.load(qs_ptr + (at * 8)[:, :, None] + w[None, None, :], mask=mask[:, :, None], other=0)
    d = tl.load(d_ptr + at, mask=mask, other=0.0).to(tl.float32)
    return q, d


@triton.jit
def q8_0_dp4a_kernel(
    xq_ptr, xd_ptr, out_ptr, d_ptr, qs_ptr, N, NB, stride_ob,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """Program (tile, b): weight rows tile BLOCK_N .. of input row b. xq [B, NB 8] int32 words,
    xd [B, NB] float32 (quantize_activation's); d [N, NB] float16, qs [N, NB 8] int32 words;
    out [B, N] (row stride stride_ob)."""
    tile = tl.program_id(0)
    b = tl.program_id(1)
    rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    first = tl.arange(0, NBLK)
    q, d = _load_step(qs_ptr, d_ptr, rows, row_mask, first, NB)
    if GDC:  # the weights are no kernel's output: x, and every write, only after the wait
        gdc_launch_dependents()
        gdc_wait()
    zero_rows = (rows * 0)[:, None]  # x loaded in the codes' [BN, NBLK] layout
    w = tl.arange(0, 8)
    xq_row = xq_ptr + b.to(tl.int64) * NB * 8
    xd_row = xd_ptr + b.to(tl.int64) * NB
    acc = tl.zeros((BLOCK_N, NBLK), dtype=tl.float32)
    for start in range(0, NB, NBLK):
        blk = start + first
        in_row = (blk < NB)[None, :] & (zero_rows == 0)
        at = zero_rows + blk[None, :]
        x = tl.load(xq_row + (at * 8)[:, :, None] + w[None, None, :], mask=in_row[:, :, None],
                    other=0)  # fmt: skip
        dx = tl.load(xd_row + at, mask=in_row, other=0.0)
        sums = tl.sum(dp4a(q, x, tl.zeros_like(q), ASM, SIGNED=True), axis=2)
        acc += (d * dx) * sums.to(tl.float32)
        q, d = _load_step(qs_ptr, d_ptr, rows, row_mask, blk + NBLK, NB)
    y = tl.sum(acc, axis=1)
    tl.store(out_ptr + b * stride_ob + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)


def matmul(x: torch.Tensor, w, cfg, quantized: QuantizedActivation | None,
           native: bool) -> torch.Tensor:  # fmt: skip
    """x [B, K] -> [B, n_out] in x's dtype, for a Q8_0 PackedWeight w (K whole blocks). cfg: a
    gemv.GemvConfig (block_n weight rows a program, blocks_per_tile 32-blocks a K step,
    num_warps, chained). quantized: x in 8 bits already (shared with other matrices that read
    x), else quantized here in a launch of its own. native: the inline assembly runs (a GPU)."""
    n_rows_x = x.shape[0]
    nb = w.n_in // 32
    gdc = cfg.chained and has_dependent_launch(x.device)
    xq = quantized or quantize_activation(x, let_next_start=gdc)
    out = torch.empty(n_rows_x, w.n_out, dtype=x.dtype, device=x.device)
    nblk = min(cfg.blocks_per_tile, triton.next_power_of_2(nb))
    extra = {"launch_pdl": True} if gdc else {}
    q8_0_dp4a_kernel[(triton.cdiv(w.n_out, cfg.block_n), n_rows_x)](
        xq.words, xq.scales, out, w.planes["d"], w.planes["qs"].reshape(-1).view(torch.int32),
        w.n_out, nb, out.stride(0), BLOCK_N=cfg.block_n, NBLK=nblk, GDC=gdc, ASM=native,
        num_warps=cfg.num_warps, num_stages=1, **extra,
    )  # fmt: skip
    return out
