"""Asking L2 for the bytes a later launch will read, from a launch that leaves the memory
bus idle: `cp.async.bulk.prefetch.L2.global` (sm_90+) takes one contiguous span and holds no
registers, so a program issues it and goes on.

Used where the next launch's weights are known before it starts but its programs cannot start
early enough to ask for them themselves: the one-token expert down, whose programs fill an
SM's registers and wait for the gate/up's programs to leave, reads the experts the routing
picked; the gate/up's programs, which know them, ask L2 for those experts' down planes, a
piece each, while they compute.

A span is cut into one piece a warp: the instruction's operands are then the same in every
lane of a warp, which makes it one instruction a warp (per-lane operands would be issued lane
by lane). Only whole 16-byte words inside the span are asked for (the instruction's unit), so
nothing outside it is touched. Triton's CPU interpreter runs no assembly: there the pieces are
computed and nothing is issued (a prefetch changes no result, only when bytes arrive).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_PLANES = 5  # the most planes an expert format has (Q5_K: d, dmin, scales, qs, qh)


@triton.jit
def l2_pieces(start_byte, n_bytes, WARPS: tl.constexpr):
    """Bytes [start_byte, start_byte + n_bytes) as [32 WARPS] tensors (thread t: warp t //
    32's piece): the piece's first 16-byte word and its length in words (0: nothing to ask).
    Together they cover the whole words inside the span, none twice."""
    lo = (start_byte.to(tl.int64) + 15) // 16
    hi = (start_byte.to(tl.int64) + n_bytes) // 16
    per = tl.maximum((hi - lo + WARPS - 1) // WARPS, 0)
    start = lo + (tl.arange(0, 32 * WARPS) // 32) * per
    return start, tl.minimum(tl.maximum(hi - start, 0), per)


@triton.jit
def prefetch_span(base, start_byte, n_bytes, WARPS: tl.constexpr, ASM: tl.constexpr):
    """Ask L2 for bytes [start_byte, start_byte + n_bytes) after `base` (any pointer), one
    piece a warp (l2_pieces); ASM=False (the interpreter): nothing is issued."""
    start, words = l2_pieces(start_byte, n_bytes, WARPS)
    if ASM:
        addr = base.to(tl.pointer_type(tl.int8)).to(tl.int64) + start * 16
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.u32 p, $2, 0; "
            "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
            "=r,l,r",
            [addr, (words * 16).to(tl.int32)],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )


@triton.jit
def prefetch_expert_piece(plane, expert_bytes, expert, piece, n_pieces, WARPS: tl.constexpr,
                          ASM: tl.constexpr):  # fmt: skip
    """Piece `piece` of n_pieces of expert `expert`'s bytes of a plane whose experts lie one
    after another, expert_bytes each (0: no such plane)."""
    size = (expert_bytes + n_pieces - 1) // n_pieces
    first = piece * size
    prefetch_span(plane, expert.to(tl.int64) * expert_bytes + first,
                  tl.minimum(size, tl.maximum(expert_bytes - first, 0)), WARPS, ASM)  # fmt: skip


@triton.jit
def prefetch_expert(p0, p1, p2, p3, p4, b0, b1, b2, b3, b4, expert, piece, n_pieces,
                    WARPS: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """prefetch_expert_piece of each of an expert tensor's planes (expert_planes' arguments)."""
    prefetch_expert_piece(p0, b0, expert, piece, n_pieces, WARPS, ASM)
    prefetch_expert_piece(p1, b1, expert, piece, n_pieces, WARPS, ASM)
    prefetch_expert_piece(p2, b2, expert, piece, n_pieces, WARPS, ASM)
    prefetch_expert_piece(p3, b3, expert, piece, n_pieces, WARPS, ASM)
    prefetch_expert_piece(p4, b4, expert, piece, n_pieces, WARPS, ASM)


def expert_planes(packed, n_expert: int) -> tuple:
    """prefetch_expert's planes and their bytes an expert, for a PackedWeight of n_expert
    experts' rows: MAX_PLANES of each, the missing ones the first plane with 0 bytes."""
    planes = list(packed.planes.values())
    sizes = [p.numel() * p.element_size() // n_expert for p in planes]
    planes += [planes[0]] * (MAX_PLANES - len(planes))
    sizes += [0] * (MAX_PLANES - len(sizes))
    return (*planes, *sizes)


def no_planes(anything: torch.Tensor) -> tuple:
    """prefetch_expert's arguments for a launch that asks for nothing."""
    return (anything,) * MAX_PLANES + (0,) * MAX_PLANES
