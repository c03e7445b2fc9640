"""Split-K for the batch-row GEMM over K-quant super-blocks (kernels/dequant_mma.py): how many
parts of K a launch takes, which super-blocks each part walks, and the end of a program that
sums the parts in the same launch.

A decode step's rows are one tile of x, so a matrix of 4096 rows in tiles of 64 makes 64
programs and one of 1024 rows 16: fewer than an H200's 132 multiprocessors. K is then split
into parts of whole super-blocks; each part's float32 sums go to part[split, m, n], and the
last program of a tile to take its ticket (kernels/tickets.py, as gemv_common.finish_rows)
adds them in split order and writes y: one launch, the same bits every run.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels.tickets import TicketCounters

MIN_SPLIT_BLOCKS = 2  # super-blocks a part of K keeps at least

# one ticket per output tile (kernels/tickets.py); the GEMMs run one after another on a
# stream, and each leaves its counters at zero
COUNTERS = TicketCounters(minimum=1 << 12)


def split_for(tiles: int, n_blocks: int, programs: int) -> int:
    """Parts of K that keep `tiles` output tiles within `programs` programs (programs //
    tiles: one wave on 132 SMs is 2 parts for 64 tiles, 8 for 16), each part at least
    MIN_SPLIT_BLOCKS of the n_blocks super-blocks."""
    most = max(1, n_blocks // MIN_SPLIT_BLOCKS)
    return max(1, min(programs // tiles, most))


def split_plan(n_blocks: int, split_k: int) -> tuple[int, int]:
    """(super-blocks a part, parts): split_k parts of whole super-blocks, the last maybe
    shorter."""
    per_split = triton.cdiv(n_blocks, split_k)
    return per_split, triton.cdiv(n_blocks, per_split)


@functools.lru_cache(maxsize=8)
def multiprocessors(device: torch.device) -> int:
    """The device's multiprocessors; 4 off a GPU (Triton's interpreter: the tests' small
    shapes then take split-K, as gemv._sm_count)."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


@triton.jit
def store_tile(acc, out_ptr, part_ptr, count_ptr, m, m_mask, rows, row_mask, M, N, stride_om,
               split, n_splits, SPLIT_K: tl.constexpr):  # fmt: skip
    """acc [BN, BM] (weight rows `rows`, x rows m) to out[m, rows] (row stride stride_om), in
    out's dtype; with SPLIT_K, through part [n_splits, M, N] float32 and the tile's ticket
    (the module docstring). The grid's axes 0 and 1 name the tile."""
    mask = row_mask[:, None] & m_mask[None, :]
    out = out_ptr + m[None, :] * stride_om + rows[:, None]
    if SPLIT_K:
        tile = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        part = part_ptr + m[None, :] * N + rows[:, None]
        tl.store(part + split * M * N, acc, mask=mask)
        tl.debug_barrier()
        ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if ticket == n_splits - 1:
            total = tl.zeros_like(acc)
            for j in range(0, n_splits):
                total += tl.load(part + j * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(out, total.to(out_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(count_ptr + tile, 0)
    else:
        tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=mask)
