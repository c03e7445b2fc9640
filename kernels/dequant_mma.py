"""A GEMM over Q4_K and Q6_K matrices for a batch's decode rows (2..64): the stored blocks
dequantized in registers into f16 tiles that meet x (f16) on the tensor cores, Marlin's idea
on ggml's layouts. Each stored block is read once per launch and nothing is written but y.

    y[m, n] = sum_k w16[n, k] x16[m, k]      (float32 sums in the MMA's accumulator)
    Q4_K  w16 = f16(q s + o),  s = f16(d sc_j), o = f16(-dmin m_j)   per sub-block j of 32
    Q6_K  w16 = f16((q - 32) s),  s = f16(d sc_r)                     per run r of 16

The weights are PackedWeight's planes, the GGUF bytes unchanged; the oracle is
reference.k_quant_f16_weights (the same roundings in numpy) and gguf's dequantizer within
them. x is rounded to f16 as the dequantized GEMM's (KernelsOps.matmul's "dequant" path) is.

Where the work goes: the scale and offset are applied to each weight once (an f16x2 FMA a
pair of weights) and the float32 sums stay in the MMA's accumulator across all of K:
the cost a weight is fixed, about 2 instructions for Q4_K and 3.75 for Q6_K
(kernels/nibbles.py: scaled_nibbles_f16, q6_k_weights_f16), amortised over the M rows by
the MMA. An H200 issues about 33e12 thread instructions a second (132 SMs x 4 x 32 x 1.98
GHz) and streams Q4_K's 0.5625 bytes a weight at about 4 TB/s (7.1e12 weights/s): 4.7
instructions a weight at the copy rate (Q6_K: 0.82 bytes, 4.9e12 weights/s, 6.8).
docs/decisions/0022 has the arithmetic and the measurements (an integer MMA, its int32 sums
scaled in float32 per region of 32 weights, lost to this at every shape and row count).

A program takes BLOCK_N weight rows (the MMA's M side) and BLOCK_M rows of x (its N side: a
decode step's rows in a tile of 16, 32 or 64) and walks its part of K a super-block an
iteration, so that Triton's pipeliner prefetches the next super-blocks' codes and scales
(num_stages - 2 ahead: their loads feed the dot through the dequantization) and x's tiles
(num_stages - 1 ahead), and the chunks within it are unrolled (their byte offsets and scale
positions fixed at compile time):

Q4_K  chunk c = 0..3: its 32 qs bytes per row [BN, 32] give sub-blocks 2c (low nibbles) and
      2c + 1 (high); two dots of K = 32 against x's columns 64c .. 64c + 63.
Q6_K  half h = 0, 1, and in it each run r of 16 lanes: the ql bytes 64h + 32 run + 16r ..
      (run 0, 1) and the qh bytes 32h + 16r .. give quarters run (low nibbles) and run + 2
      (high); four dots of K = 16 (a scale per 16 weights: a K = 16 dot has one a row).

Compiled for sm_90 (Triton 3.6, the H200's; default_config at 16 and 64 rows; `python -m
benchmarks.kernels.dequant_mma_sass` prints it) the loop takes 5.0 SASS instructions a weight a
thread for Q4_K and 6.1 for Q6_K (the assembly's 2 and 3.75, on the codes as Triton reads them
from the cp.async buffer in the wgmma register operand's layout, two bytes at a time; the rest
the scales' decoding per row, the MMAs' waits and the loop): at the issue rate 6.7e12 and
5.4e12 weights/s, 94% and 110% of the copy rate, if the loads and MMAs overlap the work. Every
plane but the f16 d and dmin goes through Triton's cp.async pipeline; those (2 bytes a row, too
narrow for cp.async) are plain loads in the iteration that uses them (a value loaded by hand an
iteration ahead and carried into the f16 tile made ptxas serialize every wgmma, its C7515 note,
and sent the tile through shared memory: decision 0022). Q6_K's 16 int8 scales are read as 4
int32 words, wide enough for cp.async.

Split-K where the tiles are fewer than twice the multiprocessors (default_config), summed in
the same launch (kernels/split_k.py). KernelsOps._matmul_path takes it at the (format, rows)
in ROWS_WON, measured by benchmarks/kernels/gpu_dequant_mma.sh, or HEARTH_DEQUANT_MMA_ROWS,
the integer GEMV's few rows included where they are listed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import interpret_mode, require
from kernels.errors import UnsupportedTensor
from kernels.gemv_dp4a import q4_k_scales_from_words, words
from kernels.nibbles import q6_k_weights_f16, scaled_nibbles_f16
from kernels.packed_weight import PackedWeight
from kernels.split_k import (
    COUNTERS,
    MIN_SPLIT_BLOCKS,
    multiprocessors,
    split_for,
    split_plan,
    store_tile,
)

FORMATS = ("Q4_K", "Q6_K")
_X_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# The (format, rows) this kernel takes a batch's matmul at: the row counts from which the H200
# measured a Llama-3-8B layer's matrices (q, k, v, o, gate, up, down) faster through it than
# through the integer GEMV (benchmarks/kernels/gemv_rows.py, docs/measurements/2026-11-29-s17-
# call-3/rows.txt; 9-64 rows: benchmarks/kernels/dequant_mma.py, .../2026-11-29-s16-call-4/mma).
# At 8 rows Q4_K's layer takes 144.7 us against the per-row GEMV's 208.2 (down 35.5 against
# 81.4, gate/up 34.4 against 42.7, q/o 12.9 against 15.3), though the GEMV still wins attn_k/v
# (5.4 against 7.3); Q6_K's 168.5 against 223.1. A batch's decode step of 5-8 sequences replays
# the graph of 8 rows (engine/hearth/batch_graph.py), so 8 is the row count that counts. At 2-4
# rows the integer GEMV wins every shape.
ROWS_WON: dict[str, tuple[int, int]] = {"Q4_K": (8, 64), "Q6_K": (8, 64)}


def takes(fmt: str, rows: int, table: dict[str, tuple[int, int]] | None = None) -> bool:
    """Whether `rows` rows of x meet a matrix of format `fmt` here (`table`, ROWS_WON by
    default)."""
    won = (ROWS_WON if table is None else table).get(fmt)
    return won is not None and won[0] <= rows <= won[1]


def parse_rows(text: str) -> dict[str, tuple[int, int]]:
    """A ROWS_WON table from "Q4_K:9-64,Q6_K:16-64" (HEARTH_DEQUANT_MMA_ROWS: measuring the
    engine with the table forced before it is set); "" is the empty table."""
    table = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        fmt, _, span = item.partition(":")
        low, _, high = span.partition("-")
        if fmt not in FORMATS or not low.isdigit() or not high.isdigit():
            raise ValueError(f"{item!r}: FORMAT:FEWEST-MOST rows, FORMAT one of {FORMATS}")
        table[fmt] = (int(low), int(high))
    return table


@dataclass(frozen=True)
class DequantMmaConfig:
    block_m: int = 0  # rows of x a program (16, 32, 64); 0: default_config's rule
    block_n: int = 64  # weight rows a program (the MMA's M side: 64 a warpgroup's wgmma)
    num_warps: int = 4
    # buffers in shared memory for the pipeliner (the codes and scales num_stages - 2
    # super-blocks ahead, x's tiles num_stages - 1): a stage is BLOCK_N x 144 bytes of Q4_K
    # (210 of Q6_K) and BLOCK_M x 512 of x (32 KB at 64 rows)
    num_stages: int = 3
    split_k: int = 0  # parts of K; 0: default_config's rule (two programs an SM)
    asm: bool = True  # the codes to f16 in inline assembly (kernels/nibbles.py); GPU only


def default_config(n_rows: int, n_out: int, n_in: int, n_sm: int = 132) -> DequantMmaConfig:
    """BLOCK_M: the power of two from 16 to 64 at or above the row count (a decode step of up
    to 64 rows is one block of rows: every weight read once). The launch shape per class of
    (matrix, rows), from the H200 sweep (docs/measurements/2026-11-29-s16-call-2/mma/sweep.txt,
    us at 16 / 64 rows, Llama-3-8B's shapes; decision 0022's follow-up has the table):

    BLOCK_M 64, n_out >= 8192 (ffn_gate/up)   bn128 w8 s3: x's tile read by half as many
        programs; 53.1 us against 78.1 for bn64 w4 s3
    BLOCK_M 64, the rest                      bn64 w4 s2: x's 32 KB a stage at s3 leaves one
        program an SM, s2 two; attn_q/o 20.9 (27.8), ffn_down 80.4 (98.8), attn_k/v 12.9 (13.0)
    BLOCK_M 16, n_in > n_out (ffn_down)       bn64 w4 s3, K in 8 parts: 69.7 us against
        70.6 in 4 (the sweep's 52.7 for bn128 w4 k8 was the kernel before d and dmin were
        loaded in place; with the f16 tile now kept in registers that shape spills 628 bytes
        under Triton 3.6, so the sweep times it again beside bn128 w8)
    otherwise                                 bn64 w4 s3 (BLOCK_M 32 is not swept yet)

    K is split where the tiles are fewer than twice the multiprocessors (split_k.split_for
    over 2 n_sm: two programs an SM, so that one's dequantization runs while the other waits
    on its loads), and at BLOCK_M 16 into two parts at least: ffn_gate/up at 16 rows 35.0 us
    in two parts against 38.5 whole."""
    block_m = min(64, max(16, triton.next_power_of_2(max(1, n_rows))))
    if block_m == 64 and n_out >= 8192:
        cfg = DequantMmaConfig(block_m=64, block_n=128, num_warps=8, num_stages=3)
    elif block_m == 64:
        cfg = DequantMmaConfig(block_m=64, num_stages=2)
    elif block_m == 16 and n_in > n_out:
        cfg = DequantMmaConfig(block_m=16, split_k=8)
    else:
        cfg = DequantMmaConfig(block_m=block_m)
    cfg = resolved(cfg, n_rows, n_out, n_in, n_sm)
    if block_m == 16 and n_in // 256 >= 2 * MIN_SPLIT_BLOCKS:
        cfg = dataclasses.replace(cfg, split_k=max(2, cfg.split_k))
    return cfg


def resolved(cfg: DequantMmaConfig, n_rows: int, n_out: int, n_in: int, n_sm: int):
    """cfg with block_m and split_k set where they are 0 (the rows' power of two from 16 to
    64; K split for two programs an SM)."""
    if cfg.block_m == 0:
        block_m = min(64, max(16, triton.next_power_of_2(max(1, n_rows))))
        cfg = dataclasses.replace(cfg, block_m=block_m)
    if cfg.split_k == 0:
        tiles = triton.cdiv(n_rows, cfg.block_m) * triton.cdiv(n_out, cfg.block_n)
        cfg = dataclasses.replace(cfg, split_k=split_for(tiles, n_in // 256, 2 * n_sm))
    return cfg


@triton.jit
def _x_tile(x_ptr, m, m_mask, k0, K, WIDTH: tl.constexpr):
    """x's f16 values k0 .. k0 + WIDTH - 1 of rows m, as [BLOCK_M, WIDTH]."""
    lane = tl.arange(0, WIDTH)
    return tl.load(x_ptr + m[:, None] * K + k0 + lane[None, :], mask=m_mask[:, None], other=0.0)


@triton.jit
def _q4_k_block(acc, d, dmin, words_ptr, qs_ptr, x_ptr, row_blk, blk, w_mask, m, m_mask, K,
                ASM: tl.constexpr):  # fmt: skip
    """acc [BN, BM] += super-block blk of the rows row_blk // NB (row_blk = row * NB + blk),
    chunk by chunk (c = 0..3: weights 64c .. 64c + 63, sub-blocks 2c and 2c + 1); d and dmin
    [BN] float32 given; the 12 scale bytes of a super-block as 3 int32 words, qs uint8."""
    s0 = tl.load(words_ptr + row_blk * 3, mask=w_mask, other=0)
    s1 = tl.load(words_ptr + row_blk * 3 + 1, mask=w_mask, other=0)
    s2 = tl.load(words_ptr + row_blk * 3 + 2, mask=w_mask, other=0)
    lane = tl.arange(0, 32)
    for c in tl.static_range(4):
        sc_lo, sc_hi, m_lo, m_hi = q4_k_scales_from_words(s0, s1, s2, c)
        qs = tl.load(qs_ptr + row_blk[:, None] * 128 + c * 32 + lane[None, :],
                     mask=w_mask[:, None], other=0)  # fmt: skip
        w_lo, w_hi = scaled_nibbles_f16(
            qs, (d * sc_lo).to(tl.float16)[:, None], (-dmin * m_lo).to(tl.float16)[:, None],
            (d * sc_hi).to(tl.float16)[:, None], (-dmin * m_hi).to(tl.float16)[:, None], ASM,
        )  # fmt: skip
        k0 = blk * 256 + c * 64
        acc = tl.dot(w_lo, tl.trans(_x_tile(x_ptr, m, m_mask, k0, K, 32)), acc)
        acc = tl.dot(w_hi, tl.trans(_x_tile(x_ptr, m, m_mask, k0 + 32, K, 32)), acc)
    return acc


@triton.jit
def _scale_byte(words, i: tl.constexpr):
    """Signed byte i of the 4 int32 words (w0, w1, w2, w3) holding 16 int8 scales, float32."""
    word = words[i // 4]
    return ((word << (24 - 8 * (i % 4))) >> 24).to(tl.float32)


@triton.jit
def _q6_k_block(acc, d, ql_ptr, qh_ptr, words_ptr, x_ptr, row_blk, blk, w_mask, m, m_mask, K,
                ASM: tl.constexpr):  # fmt: skip
    """acc [BN, BM] += super-block blk of the rows row_blk // NB, half by half (h = 0, 1:
    weights 128h .. 128h + 127), d [BN] float32 given; ql, qh uint8, the 16 int8 scales of a
    super-block as 4 int32 words."""
    words = (
        tl.load(words_ptr + row_blk * 4, mask=w_mask, other=0),
        tl.load(words_ptr + row_blk * 4 + 1, mask=w_mask, other=0),
        tl.load(words_ptr + row_blk * 4 + 2, mask=w_mask, other=0),
        tl.load(words_ptr + row_blk * 4 + 3, mask=w_mask, other=0),
    )
    lane = tl.arange(0, 16)
    for h in tl.static_range(2):
        for r in tl.static_range(2):  # lanes 16r .. 16r + 15 of each quarter
            qh = tl.load(qh_ptr + row_blk[:, None] * 64 + h * 32 + 16 * r + lane[None, :],
                         mask=w_mask[:, None], other=0)  # fmt: skip
            for run in tl.static_range(2):  # quarters run and run + 2
                ql = tl.load(ql_ptr + row_blk[:, None] * 128 + h * 64 + 32 * run + 16 * r
                             + lane[None, :], mask=w_mask[:, None], other=0)  # fmt: skip
                # the scales of weights 128h + 32q + 16r (q = run, run + 2)
                s_a = (d * _scale_byte(words, 8 * h + 2 * run + r)).to(tl.float16)
                s_b = (d * _scale_byte(words, 8 * h + 2 * run + 4 + r)).to(tl.float16)
                w_a, w_b = q6_k_weights_f16(ql, qh, s_a[:, None], s_b[:, None], run, ASM)
                k0 = blk * 256 + h * 128 + 32 * run + 16 * r
                acc = tl.dot(w_a, tl.trans(_x_tile(x_ptr, m, m_mask, k0, K, 16)), acc)
                acc = tl.dot(w_b, tl.trans(_x_tile(x_ptr, m, m_mask, k0 + 64, K, 16)), acc)
    return acc


@triton.jit
def dequant_mma_kernel(
    x_ptr, out_ptr, part_ptr, count_ptr, pd, pdmin, p0, p1, p2,
    M, N, K, NB, stride_om, blocks_per_split, n_splits,
    Q6: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
    ASM: tl.constexpr,
):  # fmt: skip
    """Grid (row tiles of x, weight row tiles, parts of K): the programs that read the same
    weights are neighbours. x f16 [M, K] contiguous; out [M, N] (row stride stride_om); part
    [n_splits, M, N] float32 and one ticket counter per tile with SPLIT_K; pd, pdmin: the f16
    d and dmin planes (Q6_K: d twice); p0..p2 as plane_args gives them. The loop walks the
    part's super-blocks (the module docstring)."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = m < M
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    split = tl.program_id(2)
    first = split * blocks_per_split
    row_start = rows.to(tl.int64) * NB
    last = tl.minimum(first + blocks_per_split, NB)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for blk in range(first, last):
        # d and dmin loaded where they are used: a value loaded an iteration ahead by hand and
        # carried into the f16 tile makes ptxas serialize every wgmma (its C7515 warning); a
        # row's d of consecutive super-blocks share a sector, so all but the first hit the cache
        d = tl.load(pd + row_start + blk, mask=row_mask, other=0.0).to(tl.float32)
        if Q6:
            acc = _q6_k_block(acc, d, p0, p1, p2, x_ptr, row_start + blk, blk, row_mask, m,
                              m_mask, K, ASM)  # fmt: skip
        else:
            dmin = tl.load(pdmin + row_start + blk, mask=row_mask, other=0.0).to(tl.float32)
            acc = _q4_k_block(acc, d, dmin, p0, p1, x_ptr, row_start + blk, blk, row_mask, m,
                              m_mask, K, ASM)  # fmt: skip
    store_tile(acc, out_ptr, part_ptr, count_ptr, m, m_mask, rows, row_mask, M, N, stride_om,
               split, n_splits, SPLIT_K)  # fmt: skip


def plane_args(w: PackedWeight) -> tuple[torch.Tensor, ...]:
    """The kernel's pd, pdmin, p0..p2 for a Q4_K or Q6_K PackedWeight (Q6_K has no dmin: d
    again, not read)."""
    p = w.planes
    if w.fmt.name == "Q6_K":
        return p["d"], p["d"], p["ql"], p["qh"], words(p["scales"])
    return p["d"], p["dmin"], words(p["scales"]), p["qs"], p["qs"]


def dequant_mma(
    x: torch.Tensor,
    w: PackedWeight,
    config: DequantMmaConfig | None = None,
    *,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """x [..., n_in] (f16, bf16 or float32; taken in f16) @ W^T -> [..., n_out] in out_dtype
    (x's dtype by default); W a Q4_K or Q6_K PackedWeight."""
    require()
    fmt = w.fmt.name
    if fmt not in FORMATS:
        raise UnsupportedTensor(
            f"{fmt}: the dequantizing MMA reads {', '.join(FORMATS)}; use quant_matmul or "
            "kernels.dequant.dequantize"
        )
    if x.shape[-1] != w.n_in or x.dtype not in _X_DTYPES:
        raise UnsupportedTensor(
            f"x {x.dtype} of shape {tuple(x.shape)} for a matrix of {w.n_in} inputs"
        )
    if x.device != w.device:
        raise UnsupportedTensor(f"x on {x.device}, the matrix on {w.device}: move one of them")
    lead = x.shape[:-1]
    x16 = x.reshape(-1, w.n_in).to(torch.float16).contiguous()
    n_rows = x16.shape[0]
    out = torch.empty(n_rows, w.n_out, dtype=out_dtype or x.dtype, device=x.device)
    if n_rows == 0:
        return out.reshape(*lead, w.n_out)
    n_blocks = w.n_in // 256
    n_sm = multiprocessors(x.device)
    if config is None:
        cfg = default_config(n_rows, w.n_out, w.n_in, n_sm)
    else:
        cfg = resolved(config, n_rows, w.n_out, w.n_in, n_sm)
    per_split, splits = split_plan(n_blocks, cfg.split_k)
    grid = (triton.cdiv(n_rows, cfg.block_m), triton.cdiv(w.n_out, cfg.block_n), splits)
    part = out
    counters = out
    if splits > 1:
        part = torch.empty(splits, n_rows, w.n_out, dtype=torch.float32, device=x.device)
        counters = COUNTERS.get(x.device, grid[0] * grid[1])
    dequant_mma_kernel[grid](
        x16, out, part, counters, *plane_args(w), n_rows, w.n_out, w.n_in, n_blocks,
        out.stride(0), per_split, splits, Q6=fmt == "Q6_K", BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n, SPLIT_K=splits > 1, ASM=cfg.asm and not interpret_mode(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return out.reshape(*lead, w.n_out)
