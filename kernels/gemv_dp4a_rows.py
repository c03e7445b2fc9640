"""The integer GEMV (gemv_dp4a.py) for a batch's 2..4 decode rows: every row in one program.

gemv_dp4a's kernel takes one input row a program: at B rows a weight tile is read B times (all
but the first from L2) and its codes unpacked and its scales decoded B times. Compiled for
sm_90 (benchmarks/kernels/gemv_rows_sass.py) its one-row program issues 2.41 instructions a
Q4_K weight a thread (4096x4096) against about 4.7 that the H200 issues in the time it streams
a weight at its copy rate, so B rows issue 2.41 B: 4 rows are 9.6, bound by issue at about
twice the copy time, as measured (a Llama-3-8B layer's seven matrices at 4 rows 2.41x their
time at one row, docs/measurements/2026-11-29-s16-call-4/mma/rows.txt).

Here a program takes BLOCK_N weight rows x one step of NBLK super-blocks (K split into whole
steps; the splits added in the same launch, a ticket per weight tile) and every input row:
the weights are loaded, their codes unpacked and their scales decoded once, then for each
input row (a static loop over ROWS, the rows' power of two; the rows past the batch's skipped
by a branch) x's words meet the same registers in dp4a, each dp4a adding into the one before.
What a row costs is its dp4a, the per-sub-block floats, the sum over the tile's groups and its
store: Q4_K 4.56 instructions a weight at 4 rows, 13.8 at 16 (docs/decisions/
2026-11-29-gemv-rows-in-one-program.md). Timed on an H200 it won at 2-4 rows and lost at 8
(to a program per row, and at 8-16 to the dequantizing MMA), so it takes at most 4 (MAX_ROWS),
and only the shapes where it won (takes_shape).
The per-row arithmetic is gemv_dp4a's (the integer sums exact in any order, the floats in its
order), so a row of a one-step shape (a 4096-wide row: no split) gives the one-row kernel's
bits where the sum over groups takes the same tree.

x in 8 bits as quantize_activation writes it ([B, K/4] words, [B, K/32] scales, [B, K/16]
sums); the weights PackedWeight's planes as gemv_dp4a.plane_args gives them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.act_quant import QuantizedActivation, dp4a, quantize_activation, x_words
from kernels.gemv_common import INTEGER_STEP_BLOCKS, whole_steps
from kernels.gemv_dp4a import (
    LOW_NIBBLES,
    load_planes,
    plane_args,
    q4_k_scales_from_words,
)
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch

# the most input rows a launch takes (the static loop's length at most): on an H200 a
# Llama-3-8B layer's matrices took 75.0 us at 2 rows and 117.4 at 4 against 76.7 and 122.4 for
# a program per row, and 237.2 at 8 against 221.9 (docs/decisions/2026-11-29-gemv-rows-in-one-
# program.md); from 5 rows gemv's program per row takes them
MAX_ROWS = 4
# Which matrices it takes (takes_shape): on an H200, at 2-4 rows, rows longer than one step
# (ffn_down of both formats: Q4_K 18.2 / 24.9 us against 23.8 / 43.8 a program a row, Q6_K
# 26.9 / 36.5 against 31.7 / 52.7) and matrices of WIDE_FROM rows or more (Q4_K attn_q/o 5.8 /
# 7.9 against 6.1 / 9.1, Q6_K 8.8 / 11.9 against 9.8 / 16.2 on one warp, gate/up Q6_K 22.3 /
# 34.6 against 25.3 / 47.8); it lost on attn_k/v (1024 weight rows: a quarter of the programs,
# each doing every row's work in turn; Q4_K 4.8 against 3.0 at 4 rows, Q6_K 6.0 against 4.5)
# (docs/measurements/2026-11-29-s21-call-3/rows.txt).
ONE_STEP_K = INTEGER_STEP_BLOCKS * 256  # weights of a row the per-row kernel reads in one step
WIDE_FROM = 4096  # output rows from which it takes one-step matrices


@dataclass(frozen=True)
class RowsConfig:
    block_n: int = 8  # weight rows a program
    blocks_per_step: int = 8  # super-blocks a program (K split into such steps)
    num_warps: int = 2
    rows_in_thread: bool = True  # gemv_common.load_words' RIT: a group's rows in one thread
    chained: bool = False  # a programmatic dependent launch on sm_90+ (gemv_dp4a's GDC)


@triton.jit
def _halves(t):
    """A tensor [..., 2, 2, 2] as its eight [...] parts, in memory order."""
    a, b = tl.split(t)
    aa, ab = tl.split(a)
    ba, bb = tl.split(b)
    aaa, aab = tl.split(aa)
    aba, abb = tl.split(ab)
    baa, bab = tl.split(ba)
    bba, bbb = tl.split(bb)
    return aaa, baa, aba, bba, aab, bab, abb, bbb


@triton.jit
def dot_chained(w, xw, ASM: tl.constexpr):
    """sum over the last two axes of dp4a(w [BN, G, 2, 4], xw [BN, G, 2, 4]) -> [BN, G], each
    dp4a adding into the one before (no separate adds of the eight sums)."""
    shape: tl.constexpr = (w.shape[0], w.shape[1], 2, 2, 2)
    w0, w1, w2, w3, w4, w5, w6, w7 = _halves(tl.reshape(w, shape))
    x0, x1, x2, x3, x4, x5, x6, x7 = _halves(tl.reshape(xw, shape))
    acc = dp4a(w0, x0, tl.zeros_like(w0), ASM)
    acc = dp4a(w1, x1, acc, ASM)
    acc = dp4a(w2, x2, acc, ASM)
    acc = dp4a(w3, x3, acc, ASM)
    acc = dp4a(w4, x4, acc, ASM)
    acc = dp4a(w5, x5, acc, ASM)
    acc = dp4a(w6, x6, acc, ASM)
    return dp4a(w7, x7, acc, ASM)


@triton.jit
def _q4_k_codes(planes, blk):
    """Once a tile: the low and high nibbles of the qs words [BN, G, 2, 4] and the decoded
    scales and mins [BN, G] of the chunk's two sub-blocks, with d and dmin."""
    qs, d, dmin, s0, s1, s2 = planes
    chunk = tl.arange(0, blk.shape[0]) % 4
    sc_lo, sc_hi, m_lo, m_hi = q4_k_scales_from_words(s0, s1, s2, chunk[None, :])
    return qs & LOW_NIBBLES, (qs >> 4) & LOW_NIBBLES, sc_lo, sc_hi, m_lo, m_hi, d, dmin


@triton.jit
def _q4_k_row(codes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM: tl.constexpr,
              RIT: tl.constexpr):  # fmt: skip
    """One input row's d sc dx sum(q xq) - dmin m dx sum(xq) per (weight row, group) [BN, G]
    (gemv_dp4a._q4_k_mac's arithmetic)."""
    lo, hi, sc_lo, sc_hi, m_lo, m_hi, d, dmin = codes
    chunk = tl.arange(0, blk.shape[0]) % 4
    base = blk * 64 + chunk * 16
    x_lo, dx_lo, isum_lo = x_words(xq_row, xd_row, xs_row, base, group_mask, rows, RIT)
    x_hi, dx_hi, isum_hi = x_words(xq_row, xd_row, xs_row, base + 8, group_mask, rows, RIT)
    sum_lo = dx_lo * tl.sum(isum_lo, axis=2).to(tl.float32)
    sum_hi = dx_hi * tl.sum(isum_hi, axis=2).to(tl.float32)
    dot_lo = dot_chained(lo, x_lo, ASM)
    dot_hi = dot_chained(hi, x_hi, ASM)
    scaled = (sc_lo * dx_lo) * dot_lo.to(tl.float32) + (sc_hi * dx_hi) * dot_hi.to(tl.float32)
    return d * scaled - dmin * (m_lo * sum_lo + m_hi * sum_hi)


@triton.jit
def _q6_k_quarter(ql_a, ql_b, qh, sw0, sw1, quarter: tl.constexpr):
    """Quarter `quarter` of a Q6_K half: its 6-bit codes [BN, G, 2, 4] and the signed scales
    of its two runs of 16 [BN, G, 2]."""
    if quarter % 2 == 0:  # noqa: SIM108 (a static if; Triton's ternary is not one)
        ql = ql_a
    else:
        ql = ql_b
    if quarter >= 2:
        ql = ql >> 4
    codes = (ql & LOW_NIBBLES) | (((qh >> (2 * quarter)) << 4) & 0x30303030)
    if quarter < 2:  # noqa: SIM108 (a static if)
        sw = sw0
    else:
        sw = sw1
    run = tl.arange(0, 2)
    shift = 24 - 8 * (2 * (quarter % 2) + run)
    return codes, (sw[:, :, None] << shift[None, None, :]) >> 24


@triton.jit
def _q6_k_codes(planes, blk):
    """Once a tile: the four quarters' codes and run scales (_q6_k_quarter), and d."""
    ql_a, ql_b, qh, d, sw0, sw1 = planes
    c0, s0 = _q6_k_quarter(ql_a, ql_b, qh, sw0, sw1, 0)
    c1, s1 = _q6_k_quarter(ql_a, ql_b, qh, sw0, sw1, 1)
    c2, s2 = _q6_k_quarter(ql_a, ql_b, qh, sw0, sw1, 2)
    c3, s3 = _q6_k_quarter(ql_a, ql_b, qh, sw0, sw1, 3)
    return c0, s0, c1, s1, c2, s2, c3, s3, d


@triton.jit
def _q6_k_row_quarter(codes, sc, xq_row, xd_row, xs_row, base, group_mask, rows,
                      ASM: tl.constexpr, RIT: tl.constexpr):  # fmt: skip
    """dx sum over the quarter's two runs of sc (sum(q xq) - 32 sum(xq)), [BN, G] float32."""
    xq, dx, isum = x_words(xq_row, xd_row, xs_row, base, group_mask, rows, RIT)
    shape: tl.constexpr = (codes.shape[0], codes.shape[1], 2, 2, 2)
    c_even, c_odd = tl.split(tl.reshape(codes, shape))  # words 0, 2 and 1, 3 of each run
    c0, c2 = tl.split(c_even)
    c1, c3 = tl.split(c_odd)
    x_even, x_odd = tl.split(tl.reshape(xq, shape))
    x0, x2 = tl.split(x_even)
    x1, x3 = tl.split(x_odd)
    # sum(q xq) - 32 sum(xq) per run, the dp4a adding into -32 sum(xq) and into each other
    runs = dp4a(c0, x0, -32 * isum, ASM)
    runs = dp4a(c1, x1, runs, ASM)
    runs = dp4a(c2, x2, runs, ASM)
    runs = dp4a(c3, x3, runs, ASM) * sc
    return dx * tl.sum(runs, axis=2).to(tl.float32)


@triton.jit
def _q6_k_row(codes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM: tl.constexpr,
              RIT: tl.constexpr):  # fmt: skip
    """One input row's d sc dx (sum(q xq) - 32 sum(xq)) per (weight row, group) [BN, G]
    (gemv_dp4a._q6_k_mac's arithmetic, its quarters in its order)."""
    c0, s0, c1, s1, c2, s2, c3, s3, d = codes
    base = blk * 64 + (tl.arange(0, blk.shape[0]) % 2) * 32
    total = tl.zeros(d.shape, dtype=tl.float32)
    total += _q6_k_row_quarter(c0, s0, xq_row, xd_row, xs_row, base, group_mask, rows, ASM, RIT)
    total += _q6_k_row_quarter(c1, s1, xq_row, xd_row, xs_row, base + 8, group_mask, rows, ASM,
                               RIT)  # fmt: skip
    total += _q6_k_row_quarter(c2, s2, xq_row, xd_row, xs_row, base + 16, group_mask, rows, ASM,
                               RIT)  # fmt: skip
    total += _q6_k_row_quarter(c3, s3, xq_row, xd_row, xs_row, base + 24, group_mask, rows, ASM,
                               RIT)  # fmt: skip
    return d * total


@triton.jit
def _row_out(r: tl.constexpr, codes, blk, group_mask, rows, row_mask, xq_ptr, xd_ptr, xs_ptr,
             out_ptr, part_ptr, split, stride_ob, N, n_rows_x, NB, ASM: tl.constexpr,
             Q6: tl.constexpr, RIT: tl.constexpr, SPLIT_K: tl.constexpr):  # fmt: skip
    """Input row r's products with the tile's weights, stored as they come out of the sum over
    the groups (no gathering of the rows into one tensor: that took a pass through shared
    memory a row): to out, or with SPLIT_K as the float32 partial part[split, r, n]."""
    xq_row, xd_row, xs_row = xq_ptr + r * NB * 64, xd_ptr + r * NB * 8, xs_ptr + r * NB * 16
    if Q6:
        part = _q6_k_row(codes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM, RIT)
    else:
        part = _q4_k_row(codes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM, RIT)
    y = tl.sum(part, axis=1)
    if SPLIT_K:
        tl.store(part_ptr + (split * n_rows_x + r) * N + rows, y, mask=row_mask)
    else:
        tl.store(out_ptr + r * stride_ob + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def _sum_splits(out_ptr, part_ptr, count_ptr, tile, rows, row_mask, n_rows_x, stride_ob, N,
                n_splits, ROWS: tl.constexpr):  # fmt: skip
    """After each row's partial is stored: take one ticket of the weight tile; the last of its
    n_splits programs adds the partials part[split, b, n] in split order, writes out and
    resets the counter (as gemv_common.finish_rows, for every row at once)."""
    b = tl.arange(0, ROWS)
    mask = (b < n_rows_x)[:, None] & row_mask[None, :]
    tl.debug_barrier()
    ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if ticket == n_splits - 1:
        part = part_ptr + b[:, None] * N + rows[None, :]
        split_stride = n_rows_x * N
        total = tl.zeros((ROWS, rows.shape[0]), dtype=tl.float32)
        for j in range(0, n_splits):
            total += tl.load(part + j * split_stride, mask=mask, other=0.0, cache_modifier=".cg")
        out = out_ptr + b[:, None] * stride_ob + rows[None, :]
        tl.store(out, total.to(out_ptr.dtype.element_ty), mask=mask)
        tl.atomic_xchg(count_ptr + tile, 0)


@triton.jit
def dp4a_rows_kernel(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3,
    N, NB, n_rows_x, stride_ob, n_splits,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr,
    SPLIT_K: tl.constexpr, Q6: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr,
    RIT: tl.constexpr,
):  # fmt: skip
    """Program t: weight tile t // n_splits, step (split) t % n_splits of NBLK super-blocks,
    every one of the n_rows_x <= ROWS input rows. The planes p0..p3 as gemv_dp4a's kernel
    takes them; out [n_rows_x, N] (row stride stride_ob), part [n_splits, n_rows_x, N]
    float32 and a counter per weight tile with SPLIT_K. GDC: the weights are loaded before the
    wait for x (gemv_dp4a's docstring), and the next kernel may start at once."""
    PER: tl.constexpr = 2 if Q6 else 4  # groups a super-block (Q6_K halves, Q4_K chunks)
    t = tl.program_id(0)
    split = t % n_splits
    tile = t // n_splits
    rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    blk = split * NBLK + tl.arange(0, NBLK * PER) // PER
    group_mask = (blk < NB) | EVEN
    planes = load_planes(p0, p1, p2, p3, rows, row_mask, blk, group_mask, NB, Q6, RIT)
    if GDC:
        gdc_launch_dependents()
        gdc_wait()
    if Q6:  # noqa: SIM108 (a static if)
        codes = _q6_k_codes(planes, blk)
    else:
        codes = _q4_k_codes(planes, blk)
    for r in tl.static_range(ROWS):
        # rows 0..ROWS/2 exist in every batch ROWS is picked for (ROWS/2 < n_rows_x <= ROWS)
        if r <= ROWS // 2:  # noqa: SIM114 (a static if; the elif's test is at run time)
            _row_out(r, codes, blk, group_mask, rows, row_mask, xq_ptr, xd_ptr, xs_ptr,
                     out_ptr, part_ptr, split, stride_ob, N, n_rows_x, NB, ASM, Q6, RIT,
                     SPLIT_K)  # fmt: skip
        elif r < n_rows_x:
            _row_out(r, codes, blk, group_mask, rows, row_mask, xq_ptr, xd_ptr, xs_ptr,
                     out_ptr, part_ptr, split, stride_ob, N, n_rows_x, NB, ASM, Q6, RIT,
                     SPLIT_K)  # fmt: skip
    if SPLIT_K:
        _sum_splits(out_ptr, part_ptr, count_ptr, tile, rows, row_mask, n_rows_x, stride_ob, N,
                    n_splits, ROWS)  # fmt: skip


def takes_shape(fmt: str, n_out: int, n_in: int) -> bool:
    """Whether a matrix's 2..MAX_ROWS rows come here rather than to a program per row (the
    figures at ONE_STEP_K): rows longer than one step, or WIDE_FROM output rows or more. A
    Llama-3-8B Q4_K_M layer at 4 rows (q, o, k, v, gate, up Q4_K, down Q6_K): 101.9 us at
    default_rows_config's tiles against 123.2 a program a row."""
    return n_in > ONE_STEP_K or n_out >= WIDE_FROM


def default_rows_config(fmt: str, n_rows_x: int, n_out: int, n_in: int) -> RowsConfig:
    """The tile for n_rows_x rows of a format and shape, from the sm_90 SASS (Triton 3.6,
    benchmarks/kernels/gemv_rows_sass.py) and the tiles timed at 2 and 4 rows on an H200
    (`python -m benchmarks.kernels.gemv_rows --rows 1,2,4 --sweep`,
    docs/measurements/2026-11-29-s21-call-3/rows.txt); rows in the thread, 1024 weights a
    thread at 2 warps:

    rows of at most 16 super-blocks    4 weight rows x 16 super-blocks (the one-row
                   kernel's tile): a 4096-wide row is one step, no split-K pass (at 2 and 4
                   rows Q4_K 2.88 and 4.56 instructions a weight against 3.36 and 5.02 for
                   8 x 8; Q6_K 2.84 and 4.54 against 3.36 and 4.81)
    otherwise      8 x 8: K in steps of 8, each row's sum over the groups within a warp
                   (Q4_K at 16 rows 33 barriers against 79)

    Q4_K on 2 warps (one warp: within 4% either way); Q6_K on one warp, twice the weights a
    thread, whose longer unpacking then issues fewer instructions a weight: at 4 rows ffn_down
    36.5 us against 53.4 on two, attn_q/o 11.9 against 20.8, gate/up 34.6 against 48.7 (2
    rows: 26.9 / 8.8 / 22.3 against 33.1 / 13.3 / 30.1)."""
    warps = 1 if fmt == "Q6_K" else 2
    if n_rows_x <= 4 and n_in <= 16 * 256:
        return RowsConfig(block_n=4, blocks_per_step=16, num_warps=warps)
    return RowsConfig(num_warps=warps)


def rows_power(n_rows_x: int) -> int:
    """ROWS for a batch of n_rows_x: the power of two at or above it."""
    return triton.next_power_of_2(n_rows_x)


def launch(w, x: torch.Tensor, xq: QuantizedActivation | None, out: torch.Tensor, counters,
           cfg: RowsConfig, native: bool) -> None:  # fmt: skip
    """out [B, n_out] = x [B, K] @ W^T for 1 <= B <= MAX_ROWS (xq: x's 8-bit form, or None:
    quantized here in a launch of its own); counters: at least one zeroed int32 a weight
    tile. native: the inline assembly runs (a GPU, not the interpreter)."""
    n_rows_x = x.shape[0]
    if not 1 <= n_rows_x <= MAX_ROWS:
        raise ValueError(f"{n_rows_x} rows: the rows kernel takes 1..{MAX_ROWS}")
    n_blocks = w.n_in // 256
    nblk = whole_steps(n_blocks, cfg.blocks_per_step)
    splits = triton.cdiv(n_blocks, nblk)
    n_tiles = triton.cdiv(w.n_out, cfg.block_n)
    even = w.n_out % cfg.block_n == 0 and n_blocks % nblk == 0
    gdc = cfg.chained and has_dependent_launch(x.device)
    xq = xq or quantize_activation(x, let_next_start=gdc)
    part = out
    if splits > 1:
        part = torch.empty(splits, n_rows_x, w.n_out, dtype=torch.float32, device=x.device)
    extra = {"launch_pdl": True} if gdc else {}
    dp4a_rows_kernel[(n_tiles * splits,)](
        xq.words, xq.scales, xq.sums, out, part, counters, *plane_args(w),
        w.n_out, n_blocks, n_rows_x, out.stride(0), splits,
        ROWS=rows_power(n_rows_x), BLOCK_N=cfg.block_n, NBLK=nblk, EVEN=even,
        SPLIT_K=splits > 1, Q6=w.fmt.name == "Q6_K", GDC=gdc, ASM=native,
        RIT=cfg.rows_in_thread, num_warps=cfg.num_warps, num_stages=1, **extra,
    )  # fmt: skip
