"""A GEMM over Q4_K and Q6_K matrices for a batch's decode rows (9..64 and more): 8-bit x
against the weights' integer codes on the tensor cores (llama.cpp's MMQ idea), each stored
block read once per launch.

    y[m, n] = sum over scale regions j of  ws[n, j] * dx[m, j] * sum_k q[n, k] xq[m, k]
              (- Q4_K's min term dmin m[n, j] * sum(x'[m, region j]))

x comes in 8 bits as the integer GEMV reads it (act_quant.py: int8 values, one float scale dx
per 32, sums of q per 16), given or quantized here; the weights are PackedWeight's planes, the
GGUF bytes unchanged. The arithmetic is the integer GEMV's (gemv_dp4a.py): the same integer
sums, scaled per region in float32, so both agree to float32 rounding; against x @ W.T the
error is that of 8-bit x (0.3-0.9% of a dot product on random weights).

A program takes BLOCK_N weight rows and BLOCK_M rows of x (the weights are the MMA's M side:
a decode step's 16-64 rows are its N side) and walks its part of K in pieces of 64 weights
(two scale regions; STEP pieces a loop iteration), one loop over the pieces so that Triton's
pipeliner prefetches the next pieces' codes and x tiles (unrolling a super-block's 8 regions
instead lets the compiler hoist all their loads: 255 registers and spills at BLOCK_M = 64).
Per scale region it unpacks the codes into an int8 tile [BLOCK_N, 32], loads x's int8
[BLOCK_M, 32] and does one `tl.dot(w, x^T)` -> int32 [BLOCK_N, BLOCK_M] (wgmma s8 on sm_90),
then scales it in float32:

Q4_K: a region is a sub-block of 32 (6-bit sc and m): the 32 qs bytes of chunk c give the
    codes 0..15 of sub-blocks 2c (low nibbles) and 2c + 1 (high).
    acc += dot * (d sc)[n] dx[m]  -  (dmin m)[n] (dx sum(xq))[m]
Q6_K: a quarter of 32 weights holds two runs of 16, each with its int8 scale, and the int8
    MMA takes K = 32 at least: the quarter's codes (q - 32, in -32..31) meet x twice, once with
    x's second 16 zeroed and once with its first 16 zeroed (twice the MMA work of Q4_K).
    acc += (dot_0 sc_0 + dot_1 sc_1)[n, m] * d[n] dx[m]
The int32 sums (|s| < 2^22) become floats by the exponent trick (act_quant's ROUND_MAGIC), not
the int-to-float unit (a quarter-rate instruction). The small loads (d and the scales, x's
scales and sums) are not pipelined by Triton: `prefetch` loads each piece's during the piece
before.

Costs to watch when it is measured: Q6_K's doubled MMAs, and the float32 scaling of every
[BLOCK_N, BLOCK_M] sum per region of 32 (about 5 instructions an element: at 64 rows of a
4096 x 4096 matrix some 170 M, a few microseconds of the SMs' integer and float units).

Split-K where the tiles are fewer than the multiprocessors, summed in the same launch
(kernels/split_k.py).

Not used by the engine yet (KernelsOps): unmeasured. docs/decisions/0022 decides, once it is
measured (benchmarks/kernels/quant_mma.py), which rows take it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.act_quant import ROUND_BITS, ROUND_MAGIC, QuantizedActivation, quantize_activation
from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.gemv_dp4a import q4_k_scales_from_words, words
from kernels.packed_weight import PackedWeight
from kernels.split_k import COUNTERS, multiprocessors, split_for, split_plan, store_tile

FORMATS = ("Q4_K", "Q6_K")
_X_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class MmaConfig:
    block_m: int = 0  # rows of x a program (16, 32, 64, ...); 0: default_config's rule
    block_n: int = 64  # weight rows a program (the MMA's M side)
    step: int = 1  # pieces of 64 weights (two scale regions) a loop iteration: 1, 2 or 4
    num_warps: int = 4
    # pieces whose codes and x tiles are in flight (shared memory, not registers: 5 keeps the
    # registers of 3). Memory-bound at about one program an SM (default_config's split), a
    # program must keep several KB in flight: a piece is BLOCK_N x 32 bytes of codes and 2 x
    # BLOCK_M x 32 of x
    num_stages: int = 5
    split_k: int = 0  # parts of K; 0: default_config's rule (from the tiles and the SMs)
    prefetch: bool = True  # each piece's scales loaded during the piece before (the kernel's)


def default_config(n_rows: int, n_out: int, n_in: int, n_sm: int = 132) -> MmaConfig:
    """BLOCK_M: the power of two from 16 to 64 at or above the row count (a decode step of up
    to 64 rows is one block of rows: every weight read once). K split where the tiles are
    fewer than the multiprocessors, into as many parts as keep the programs within one wave
    (n_sm // tiles: 2 for a 4096-row matrix in tiles of 64, 8 for 1024 rows). 8 warps from 64
    rows: with 4, a thread holds a quarter of the [64, 64] sums and of each scale region's
    x scales, and ptxas gave 255 registers and spills (sm_90, Triton 3.8; 8 warps: about 230)."""
    block_m = _block_m(n_rows)
    cfg = MmaConfig(block_m=block_m, num_warps=8 if block_m >= 64 else 4)
    return resolved(cfg, n_rows, n_out, n_in, n_sm)


def _block_m(n_rows: int) -> int:
    return min(64, max(16, triton.next_power_of_2(max(1, n_rows))))


def resolved(cfg: MmaConfig, n_rows: int, n_out: int, n_in: int, n_sm: int) -> MmaConfig:
    """cfg with block_m and split_k set where they are 0 (default_config's rules)."""
    if cfg.block_m == 0:
        cfg = dataclasses.replace(cfg, block_m=_block_m(n_rows))
    if cfg.split_k == 0:
        tiles = triton.cdiv(n_rows, cfg.block_m) * triton.cdiv(n_out, cfg.block_n)
        cfg = dataclasses.replace(cfg, split_k=split_for(tiles, n_in // 256, n_sm))
    return cfg


@triton.jit
def exact_float(i):
    """int32 |i| < 2^22 -> float32 exactly: the float bits of 1.5 * 2^23 + i, less 1.5 * 2^23."""
    return (i + ROUND_BITS).to(tl.float32, bitcast=True) - ROUND_MAGIC


@triton.jit
def _x_tile(xq_ptr, m, m_mask, k0, K):
    """x's int8 values k0 .. k0 + 31 of rows m, as [BLOCK_M, 32]."""
    lane = tl.arange(0, 32)
    return tl.load(xq_ptr + m[:, None] * K + k0 + lane[None, :], mask=m_mask[:, None], other=0)


@triton.jit
def _q4_k_small(p0, p1, p2, xd_ptr, xs_ptr, row_blk, blk, c, w_mask, m, m_mask, n_groups):
    """The small loads of chunk c of super-block blk, as loaded: d, dmin (f16) and the scale
    words s0..s2 [BN] of rows row_blk // NB; x's dx [BM] of sub-blocks 2c and 2c + 1 and the
    sums of q of their four runs of 16 [BM]."""
    d = tl.load(p0 + row_blk, mask=w_mask, other=0.0)
    dmin = tl.load(p1 + row_blk, mask=w_mask, other=0.0)
    s0 = tl.load(p2 + row_blk * 3, mask=w_mask, other=0)
    s1 = tl.load(p2 + row_blk * 3 + 1, mask=w_mask, other=0)
    s2 = tl.load(p2 + row_blk * 3 + 2, mask=w_mask, other=0)
    g = blk * 8 + 2 * c  # x's group of 32 of sub-block 2c
    dx_lo = tl.load(xd_ptr + m * n_groups + g, mask=m_mask, other=0.0)
    dx_hi = tl.load(xd_ptr + m * n_groups + g + 1, mask=m_mask, other=0.0)
    runs = xs_ptr + m * 2 * n_groups + 2 * g
    i0 = tl.load(runs, mask=m_mask, other=0)
    i1 = tl.load(runs + 1, mask=m_mask, other=0)
    i2 = tl.load(runs + 2, mask=m_mask, other=0)
    i3 = tl.load(runs + 3, mask=m_mask, other=0)
    return d, dmin, s0, s1, s2, dx_lo, dx_hi, i0, i1, i2, i3


@triton.jit
def _q4_k_piece(acc, small, p3, xq_ptr, row_blk, blk, c, w_mask, m, m_mask, K):
    """acc [BN, BM] += chunk c (weights 64c .. 64c + 63: sub-blocks 2c and 2c + 1) of
    super-block blk of rows row_blk // NB (row_blk = row * NB + blk), its small loads given
    (_q4_k_small). p3: qs (uint8)."""
    d, dmin, s0, s1, s2, dx_lo, dx_hi, i0, i1, i2, i3 = small
    d = d.to(tl.float32)
    dmin = dmin.to(tl.float32)
    lane = tl.arange(0, 32)
    qs = tl.load(p3 + row_blk[:, None] * 128 + c * 32 + lane[None, :], mask=w_mask[:, None],
                 other=0)  # fmt: skip
    sc_lo, sc_hi, m_lo, m_hi = q4_k_scales_from_words(s0, s1, s2, c)
    for half in tl.static_range(2):  # sub-block 2c + half: low, then high nibbles
        if half == 0:
            codes = (qs & 0x0F).to(tl.int8)
            scale, low, dx, isum = d * sc_lo, dmin * m_lo, dx_lo, i0 + i1
        else:
            codes = (qs >> 4).to(tl.int8)
            scale, low, dx, isum = d * sc_hi, dmin * m_hi, dx_hi, i2 + i3
        g = blk * 8 + 2 * c + half  # x's group of 32
        x = _x_tile(xq_ptr, m, m_mask, g * 32, K)
        dot = tl.dot(codes, tl.trans(x), out_dtype=tl.int32)  # [BN, BM]
        x_sum = dx * isum.to(tl.float32)  # sum of x' over the sub-block
        # each product formed from acc or the dot, so that no [BN, BM] tile of scales alone
        # exists for the compiler to compute ahead of the dot (registers: 255 and spills at
        # BLOCK_M = 64 with 4 warps, scales first)
        acc -= low[:, None] * x_sum[None, :]
        acc += (exact_float(dot) * dx[None, :]) * scale[:, None]
    return acc


@triton.jit
def _q6_k_small(p2, p3, xd_ptr, row_blk, blk, h, run, w_mask, m, m_mask, n_groups):
    """The small loads of quarters run and run + 2 of half h of super-block blk, as loaded:
    d (f16) and the int8 scales of the quarters' runs of 16 [BN]; x's dx of both [BM]."""
    d = tl.load(p3 + row_blk, mask=w_mask, other=0.0)
    at = p2 + row_blk * 16 + 8 * h + 2 * run
    sc_a0 = tl.load(at, mask=w_mask, other=0)
    sc_a1 = tl.load(at + 1, mask=w_mask, other=0)
    sc_b0 = tl.load(at + 4, mask=w_mask, other=0)  # quarter run + 2
    sc_b1 = tl.load(at + 5, mask=w_mask, other=0)
    g = blk * 8 + 4 * h + run  # x's group of 32 of quarter run
    dx_a = tl.load(xd_ptr + m * n_groups + g, mask=m_mask, other=0.0)
    dx_b = tl.load(xd_ptr + m * n_groups + g + 2, mask=m_mask, other=0.0)
    return d, sc_a0, sc_a1, sc_b0, sc_b1, dx_a, dx_b


@triton.jit
def _q6_k_piece(acc, small, p0, p1, xq_ptr, row_blk, blk, h, run, w_mask, m, m_mask, K):
    """acc [BN, BM] += quarters run and run + 2 (ql bytes 64h + 32 run + l, low and high
    nibbles) of half h of super-block blk of rows row_blk // NB, its small loads given
    (_q6_k_small). p0, p1: ql, qh (uint8)."""
    d, sc_a0, sc_a1, sc_b0, sc_b1, dx_a, dx_b = small
    d = d.to(tl.float32)
    lane = tl.arange(0, 32)
    qh = tl.load(p1 + row_blk[:, None] * 64 + h * 32 + lane[None, :], mask=w_mask[:, None],
                 other=0)  # fmt: skip
    ql = tl.load(p0 + row_blk[:, None] * 128 + h * 64 + run * 32 + lane[None, :],
                 mask=w_mask[:, None], other=0)  # fmt: skip
    first = (lane < 16)[None, :]
    for nibble in tl.static_range(2):
        q = run + 2 * nibble  # weights 128h + 32q + l
        if nibble == 0:
            sc0, sc1, dx = sc_a0.to(tl.float32), sc_a1.to(tl.float32), dx_a
        else:
            sc0, sc1, dx = sc_b0.to(tl.float32), sc_b1.to(tl.float32), dx_b
        six = ((ql >> (4 * nibble)) & 0x0F) | (((qh >> (2 * q)) & 0x03) << 4)
        codes = (six.to(tl.int16) - 32).to(tl.int8)
        g = blk * 8 + 4 * h + q  # x's group of 32
        x = _x_tile(xq_ptr, m, m_mask, g * 32, K)
        zero = tl.zeros_like(x)
        dot0 = tl.dot(codes, tl.trans(tl.where(first, x, zero)), out_dtype=tl.int32)
        dot1 = tl.dot(codes, tl.trans(tl.where(first, zero, x)), out_dtype=tl.int32)
        runs = exact_float(dot0) * sc0[:, None] + exact_float(dot1) * sc1[:, None]
        acc += (runs * dx[None, :]) * d[:, None]  # no tile of scales alone (_q4_k_piece)
    return acc


@triton.jit
def _small(p0, p1, p2, p3, xd_ptr, xs_ptr, row_start, piece, row_mask, m, m_mask, n_groups,
           Q6: tl.constexpr):  # fmt: skip
    """Piece `piece`'s small loads (the format's _small)."""
    blk = piece // 4
    if Q6:
        small = _q6_k_small(p2, p3, xd_ptr, row_start + blk, blk, (piece // 2) % 2, piece % 2,
                            row_mask, m, m_mask, n_groups)  # fmt: skip
    else:
        small = _q4_k_small(p0, p1, p2, xd_ptr, xs_ptr, row_start + blk, blk, piece % 4,
                            row_mask, m, m_mask, n_groups)  # fmt: skip
    return small


@triton.jit
def quant_mma_kernel(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3,
    M, N, K, NB, stride_om, blocks_per_split, n_splits,
    Q6: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STEP: tl.constexpr,
    SPLIT_K: tl.constexpr, PREFETCH: tl.constexpr,
):  # fmt: skip
    """Grid (row tiles of x, weight row tiles, parts of K): the programs that read the same
    weights are neighbours. x: quantize_activation's buffers, xq read as int8 [M, K]; out
    [M, N] (row stride stride_om); part [n_splits, M, N] float32 and one ticket counter per
    (x tile, weight tile) with SPLIT_K. The loop walks pieces of 64 weights (4 a super-block),
    STEP (1, 2 or 4) an iteration. The codes and x's int8 tiles go through shared memory,
    num_stages ahead (Triton's pipeliner); the small loads (the weights' scales, x's scales and
    sums) it leaves in the loop: PREFETCH loads each piece's during the piece before, so their
    latency (from memory: d and the scales are read once) overlaps that piece's work."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = m < M
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    split = tl.program_id(2)
    first = split * blocks_per_split
    row_start = rows.to(tl.int64) * NB
    n_groups = K // 32
    start = first * 4
    end = tl.minimum(first + blocks_per_split, NB) * 4
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    small = _small(p0, p1, p2, p3, xd_ptr, xs_ptr, row_start, start, row_mask, m, m_mask,
                   n_groups, Q6)  # fmt: skip
    for piece0 in range(start, end, STEP):
        for i in tl.static_range(STEP):
            piece = piece0 + i
            blk = piece // 4
            if PREFETCH:  # the next piece's (the last piece's again at the end)
                upcoming = _small(p0, p1, p2, p3, xd_ptr, xs_ptr, row_start,
                                  tl.minimum(piece + 1, end - 1), row_mask, m, m_mask,
                                  n_groups, Q6)  # fmt: skip
            else:
                small = _small(p0, p1, p2, p3, xd_ptr, xs_ptr, row_start, piece, row_mask, m,
                               m_mask, n_groups, Q6)  # fmt: skip
            if Q6:
                acc = _q6_k_piece(acc, small, p0, p1, xq_ptr, row_start + blk, blk,
                                  (piece // 2) % 2, piece % 2, row_mask, m, m_mask,
                                  K)  # fmt: skip
            else:
                acc = _q4_k_piece(acc, small, p3, xq_ptr, row_start + blk, blk, piece % 4,
                                  row_mask, m, m_mask, K)  # fmt: skip
            if PREFETCH:
                small = upcoming
    store_tile(acc, out_ptr, part_ptr, count_ptr, m, m_mask, rows, row_mask, M, N, stride_om,
               split, n_splits, SPLIT_K)  # fmt: skip


def plane_args(w: PackedWeight) -> tuple[torch.Tensor, ...]:
    """The kernel's p0..p3 for a Q4_K or Q6_K PackedWeight."""
    p = w.planes
    if w.fmt.name == "Q6_K":
        return p["ql"], p["qh"], p["scales"], p["d"]
    return p["d"], p["dmin"], words(p["scales"]), p["qs"]


def quant_mma(
    x: torch.Tensor,
    w: PackedWeight,
    config: MmaConfig | None = None,
    *,
    quantized: QuantizedActivation | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """x [..., n_in] (f16, bf16 or float32) @ W^T -> [..., n_out] in out_dtype (x's dtype by
    default); W a Q4_K or Q6_K PackedWeight. quantized: x's 8-bit form (quantize_activation(x),
    or a norm's that wrote it), else x is quantized here in a launch of its own."""
    require()
    fmt = w.fmt.name
    if fmt not in FORMATS:
        raise UnsupportedTensor(
            f"{fmt}: the integer MMA reads {', '.join(FORMATS)}; use quant_matmul or "
            "kernels.dequant.dequantize"
        )
    if x.shape[-1] != w.n_in or x.dtype not in _X_DTYPES:
        raise UnsupportedTensor(
            f"x {x.dtype} of shape {tuple(x.shape)} for a matrix of {w.n_in} inputs"
        )
    if x.device != w.device:
        raise UnsupportedTensor(f"x on {x.device}, the matrix on {w.device}: move one of them")
    lead = x.shape[:-1]
    x2 = x.reshape(-1, w.n_in)
    n_rows = x2.shape[0]
    out = torch.empty(n_rows, w.n_out, dtype=out_dtype or x.dtype, device=x.device)
    if n_rows == 0:
        return out.reshape(*lead, w.n_out)
    if quantized is None:
        quantized = quantize_activation(x2)
    elif quantized.shape != (n_rows, w.n_in):
        raise UnsupportedTensor(
            f"quantized activation of shape {quantized.shape} is not of this input "
            f"{(n_rows, w.n_in)}: quantize the same x that is passed"
        )
    n_blocks = w.n_in // 256
    n_sm = multiprocessors(x.device)
    if config is None:
        cfg = default_config(n_rows, w.n_out, w.n_in, n_sm)
    else:
        cfg = resolved(config, n_rows, w.n_out, w.n_in, n_sm)
    if cfg.step not in (1, 2, 4):
        raise UnsupportedTensor(f"step {cfg.step}: 1, 2 or 4 pieces of 64 weights")
    per_split, splits = split_plan(n_blocks, cfg.split_k)
    grid = (triton.cdiv(n_rows, cfg.block_m), triton.cdiv(w.n_out, cfg.block_n), splits)
    part = out
    counters = out
    if splits > 1:
        part = torch.empty(splits, n_rows, w.n_out, dtype=torch.float32, device=x.device)
        counters = COUNTERS.get(x.device, grid[0] * grid[1])
    quant_mma_kernel[grid](
        quantized.words.view(torch.int8), quantized.scales, quantized.sums, out, part, counters,
        *plane_args(w), n_rows, w.n_out, w.n_in, n_blocks, out.stride(0), per_split, splits,
        Q6=fmt == "Q6_K", BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, STEP=cfg.step,
        SPLIT_K=splits > 1, PREFETCH=cfg.prefetch, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )  # fmt: skip
    return out.reshape(*lead, w.n_out)
