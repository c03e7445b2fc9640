"""A dense GEMM over a quantized matrix: y [M, N] = x [M, K] @ W^T, W a PackedWeight whose
blocks are decoded in registers into f16 tiles that meet x in `tl.dot` (tensor cores), float32
accumulation, y in x's dtype. The dense counterpart of the MoE prefill's grouped GEMM
(moe_grouped_gemm.py, docs/kernels-moe-prefill.md), for the rows the GEMV serves badly:

    a batch's decode step (up to 64 rows): the GEMV (gemv.py) takes 16 rows a launch, so each
        weight is read from memory once per 16 rows; here once per BLOCK_M rows.
    a prefill chunk (hundreds of rows): dequant.py writes the whole matrix in f16 (2 bytes a
        weight, read again by torch's GEMM); here the blocks are read as stored (4.5 to 8.5
        bits a weight) and nothing is written but y.

Formats: those moe_blocks.load_pairs decodes (FORMATS: Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1; a PackedWeight's planes are the expert weights' planes of one expert).

A program takes BLOCK_M rows of x and BLOCK_N rows of W and walks its part of K (all of it,
or one of SPLIT_K parts) in steps of NG groups of 32 weights: load_pairs reads the step's
code words and run scales, each run of 16 weights is expanded to f16 (s u - c) and x's 16
columns of each run are gathered to match (the runs of a step come in load_pairs' order, not
the row's: the sum over K does not care); the helpers are the grouped GEMM's (`_x_runs`,
`_dot_step`). The grid's first axis is the blocks of x's rows, so the programs that read the
same weight tile run side by side and all but the first find it in L2: each weight comes
from memory about once a launch. Where the tiles are fewer than the GPU's multiprocessors (a
decode step's one block of rows over a 4096-row matrix is 64 tiles; the k/v projections'
1024 rows are 16), K is split (split-K): each part's float32 sums go to a buffer
[SPLIT_K, M, N], summed in part order by torch (the same bits every run).

x is cast to f16 per tile (f16, bf16 or float32 inputs); the error against float64 is that of
f16 weights and activations (about 1e-3 of a dot product), not the GEMV's (float32 x, or 8-bit
x at one row).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.moe_blocks import FORMAT_CODES, load_pairs, plane_args
from kernels.moe_grouped_gemm import _dot_step, _x_runs

FORMATS = tuple(name for name in FORMAT_CODES if name != "MXFP4")  # MXFP4: no PackedWeight


@dataclass(frozen=True)
class GemmConfig:
    block_m: int = 64  # rows of x a program
    block_n: int = 64  # rows of W a program
    ng: int = 2  # groups of 32 weights a K step (the grouped GEMM's register budget)
    num_warps: int = 4
    num_stages: int = 2
    split_k: int = 1  # parts of K, each its own program (float32 partial sums)


MIN_SPLIT_GROUPS = 16  # groups of 32 weights a part of K keeps at least (8 steps of NG = 2)


def default_config(n_rows: int, n_out: int = 4096, n_in: int = 4096, n_sm: int = 132):
    """BLOCK_M: the power of two from 16 to 64 at or above the row count (a batch's decode
    step fits one block: every weight read once; 64 is where the grouped GEMM compiles to
    wgmma on sm_90), 128 from 256 rows (a prefill chunk: half the weight tiles' decoding per
    row). Fewer tiles than n_sm multiprocessors: K split so that about 2 n_sm programs run,
    each part at least MIN_SPLIT_GROUPS groups. Not yet measured:
    benchmarks/kernels/quant_gemm.py --sweep times the others."""
    if n_rows >= 256:
        cfg = GemmConfig(block_m=128, block_n=64, num_warps=8)
    else:
        cfg = GemmConfig(block_m=min(64, max(16, triton.next_power_of_2(n_rows))))
    return with_split(cfg, n_rows, n_out, n_in, n_sm)


def with_split(cfg: GemmConfig, n_rows: int, n_out: int, n_in: int, n_sm: int) -> GemmConfig:
    """cfg with split_k set by default_config's rule for its tiles (1 from n_sm tiles up)."""
    tiles = triton.cdiv(n_rows, cfg.block_m) * triton.cdiv(n_out, cfg.block_n)
    split = 1
    if tiles < n_sm:
        split = min(triton.cdiv(2 * n_sm, tiles), max(1, (n_in // 32) // MIN_SPLIT_GROUPS))
    return dataclasses.replace(cfg, split_k=split)


@triton.jit
def _quant_gemm_kernel(
    x_ptr, out_ptr, p0, p1, p2, p3, p4, M, N, K, NB, groups_per_part,
    FMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NG: tl.constexpr,
):  # fmt: skip
    """See the module docstring. x [M, K] contiguous; out [M, N], or [SPLIT_K, M, N] float32
    (part program_id(2): groups_per_part groups of K from groups_per_part * part, a multiple
    of NG)."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = m < M
    x_row = m.to(tl.int64)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    wrow = rows.to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    first = tl.program_id(2) * groups_per_part
    for k0 in range(first, first + groups_per_part, NG):
        ge = k0 + tl.arange(0, NG)
        group_mask = ge < K // 32
        u_lo, u_hi, s_lo, c_lo, s_hi, c_hi, r_lo, r_hi = load_pairs(
            p0, p1, p2, p3, p4, wrow, row_mask, ge, group_mask, NB, FMT
        )
        x_lo = _x_runs(x_ptr, x_row, m_mask, r_lo, K, NG)
        x_hi = _x_runs(x_ptr, x_row, m_mask, r_hi, K, NG)
        acc = _dot_step(acc, x_lo, x_hi, u_lo, u_hi, s_lo, c_lo, s_hi, c_hi)
    at = out_ptr + (tl.program_id(2) * M + x_row)[:, None] * N + rows[None, :]
    tl.store(at, acc.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & row_mask[None, :])


def supports(w) -> bool:
    """Whether quant_gemm multiplies this PackedWeight (its format and planes)."""
    return w.fmt.name in FORMATS


def quant_gemm(x: torch.Tensor, w, config: GemmConfig | None = None) -> torch.Tensor:
    """x [..., n_in] (f16, bf16 or float32) @ W^T -> [..., n_out] in x's dtype; w: a PackedWeight
    of one of FORMATS (others raise UnsupportedTensor: the caller's GEMV or dequantize path)."""
    require()
    if not supports(w):
        raise UnsupportedTensor(
            f"{w.fmt.name}: the quantized GEMM reads {', '.join(FORMATS)}; use quant_matmul "
            "or kernels.dequant.dequantize"
        )
    if x.shape[-1] != w.n_in or not x.dtype.is_floating_point:
        raise UnsupportedTensor(
            f"x {x.dtype} of shape {tuple(x.shape)} for a matrix of {w.n_in} inputs"
        )
    if x.device != w.device:
        raise UnsupportedTensor(f"x on {x.device}, the matrix on {w.device}: move one of them")
    x2 = x.reshape(-1, w.n_in).contiguous()
    n_rows = x2.shape[0]
    out = torch.empty(n_rows, w.n_out, dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return out.reshape(*x.shape[:-1], w.n_out)
    cfg = config or default_config(n_rows, w.n_out, w.n_in, _multiprocessors(x.device))
    groups = w.n_in // 32
    per_part = triton.cdiv(triton.cdiv(groups, cfg.split_k), cfg.ng) * cfg.ng
    parts = triton.cdiv(groups, per_part)
    target = out
    if parts > 1:
        target = torch.empty(parts, n_rows, w.n_out, dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(n_rows, cfg.block_m), triton.cdiv(w.n_out, cfg.block_n), parts)
    _quant_gemm_kernel[grid](
        x2, target, *plane_args(w), n_rows, w.n_out, w.n_in, w.n_in // w.fmt.block_size,
        per_part, FMT=FORMAT_CODES[w.fmt.name], BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        NG=cfg.ng, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    if parts > 1:
        out.copy_(target.sum(dim=0))
    return out.reshape(*x.shape[:-1], w.n_out)


@functools.lru_cache(maxsize=8)
def _multiprocessors(device: torch.device) -> int:
    """The device's multiprocessors (default_config's n_sm); an H100's 132 off a GPU."""
    if device.type != "cuda":
        return 132
    return torch.cuda.get_device_properties(device).multi_processor_count
