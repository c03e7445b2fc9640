"""The expert GEMV's next wave of weights brought into L2 by the wave before it.

ncu on an H200 (docs/measurements/2026-11-29-s19-call-1/ncu-*.txt): Qwen3-30B-A3B's 1-token
gate+up launch is 1,536 programs of which an SM holds 4 (108 registers a thread): 2.91 waves,
each program a chain of its routing's load (L2), its weights' (HBM), x's and its arithmetic,
with DRAM 24% busy over the launch. A program that starts in a later wave finds nothing of its
weights on chip. Here each program of a launch, once its own weights are on the way, issues
`prefetch.global.L2` for the code planes of the weight tile that the program one wave after it
reads (linear program id + WAVE, the programs that fit the GPU at once): that program then reads
them from L2. Its expert comes from the routing, which is complete before the launch starts
(moe_gemv's module docstring); a program past the last group prefetches nothing.

WAVE is the SMs times the programs an SM holds, known once the kernel is compiled
(kernels/occupancy.py): the first launch of a kernel shape guesses 4 programs an SM and later
launches (a CUDA graph's capture comes after the engine's eager warm-up) use the count.
Off unless HEARTH_MOE_PREFETCH=1, until a device run (the expert GEMV's rows and Qwen3's decode
with and without) decides; Triton's interpreter never prefetches (inline assembly).
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

from kernels.occupancy import compiled_programs_per_sm, sm_limits

ENABLED = os.environ.get("HEARTH_MOE_PREFETCH") == "1"
LINE = 128  # bytes a prefetch brings in (an L2 line)
_GUESS_PER_SM = 4
_per_sm: dict[tuple, int] = {}


@triton.jit
def _prefetch_l2(at, mask):
    """prefetch.global.L2 of each address where mask; the int32 zeros it returns are unused."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
        "=r,l,r",
        [at, mask.to(tl.int32)],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _plane_lines(plane, row_bytes, first_row, n_rows, LINES: tl.constexpr):
    """Prefetch rows first_row .. first_row + n_rows of a plane of row_bytes bytes a row (the
    rows are consecutive: one span)."""
    line = tl.arange(0, LINES)
    span = n_rows * row_bytes
    at = plane + first_row.to(tl.int64) * row_bytes + line * 128
    _prefetch_l2(at, line * 128 < span)


@triton.jit
def prefetch_next_wave(pf_a0, pf_a1, pf_b0, pf_b1, rb_a0, rb_a1, rb_b0, rb_b1,
                       group_expert_ptr, n_groups, wave, N, BLOCK_N: tl.constexpr,
                       TWO: tl.constexpr, LINES: tl.constexpr):  # fmt: skip
    """For a launch of one split of K (grid (tiles, 1, groups)): the tile of the program WAVE
    after this one, its code planes a0, a1 (and b0, b1 where TWO: gate and up) by their bytes
    a row (0: no such plane)."""
    n_tiles = tl.cdiv(N, BLOCK_N)
    after = tl.program_id(0) + n_tiles * tl.program_id(2) + wave
    g = after // n_tiles
    if g < n_groups:
        tile = after % n_tiles
        expert = tl.load(group_expert_ptr + g)
        first = expert.to(tl.int64) * N + tile * BLOCK_N
        n_rows = tl.minimum(N - tile * BLOCK_N, BLOCK_N)
        _plane_lines(pf_a0, rb_a0, first, n_rows, LINES)
        _plane_lines(pf_a1, rb_a1, first, n_rows, LINES)
        if TWO:
            _plane_lines(pf_b0, rb_b0, first, n_rows, LINES)
            _plane_lines(pf_b1, rb_b1, first, n_rows, LINES)


def code_planes(packed) -> tuple[tuple[torch.Tensor, int], tuple[torch.Tensor, int]]:
    """The two largest planes of a PackedWeight (its codes: Q4_K's qs, Q6_K's ql and qh, ...)
    as (bytes, bytes a row); a format of one such plane has (it, 0) second."""
    planes = sorted((p.shape[1] * p.element_size(), name) for name, p in packed.planes.items())
    first = packed.planes[planes[-1][1]]
    out = [(first.view(torch.uint8), planes[-1][0])]
    if len(planes) > 1 and planes[-2][0] >= LINE:
        out.append((packed.planes[planes[-2][1]].view(torch.uint8), planes[-2][0]))
    else:
        out.append((out[0][0], 0))
    return out[0], out[1]


def lines(block_n: int, row_bytes: int) -> int:
    """LINES: the power of two of L2 lines that a tile's rows of the largest plane span."""
    return triton.next_power_of_2(triton.cdiv(block_n * row_bytes, LINE))


@functools.cache
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def wave(device: torch.device, key: tuple) -> int:
    """Programs of the kernel shape `key` that the GPU holds at once (a guess until noted)."""
    return _sm_count(device) * _per_sm.get(key, _GUESS_PER_SM)


def note(device: torch.device, key: tuple, compiled) -> None:
    """After a launch: its compiled kernel's programs an SM, for the later launches' WAVE."""
    if key not in _per_sm and compiled is not None:
        _per_sm[key] = compiled_programs_per_sm(compiled, sm_limits(device))
