"""Asking L2 for the bytes a later launch will read: `cp.async.bulk.prefetch.L2.global` (sm_90+)
takes one contiguous span and holds no registers, so a program issues it and goes on.

Used where a launch's programs finish before the next launch can read well: a decode step's
attention at depth fills every SM until its last programs end, so the output projection's
GEMV after it (and the reduce) cannot start loading its weights early; each attention program,
its pages read, asks L2 for a piece of that matrix.

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

MAX_PLANES = 5  # the most planes a block format has (Q5_K: d, dmin, scales, qs, qh)


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
def _prefetch_piece(plane, plane_bytes, piece, n_pieces, WARPS: tl.constexpr,
                    ASM: tl.constexpr):  # fmt: skip
    """Piece `piece` of n_pieces of a plane of plane_bytes bytes (0: no such plane)."""
    size = (plane_bytes + n_pieces - 1) // n_pieces
    first = piece.to(tl.int64) * size
    prefetch_span(plane, first, tl.minimum(size, tl.maximum(plane_bytes - first, 0)), WARPS, ASM)


@triton.jit
def prefetch_weight_piece(p0, p1, p2, p3, p4, b0, b1, b2, b3, b4, piece, n_pieces,
                          WARPS: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """Piece `piece` of n_pieces of each of a matrix's planes (weight_planes' arguments)."""
    _prefetch_piece(p0, b0, piece, n_pieces, WARPS, ASM)
    _prefetch_piece(p1, b1, piece, n_pieces, WARPS, ASM)
    _prefetch_piece(p2, b2, piece, n_pieces, WARPS, ASM)
    _prefetch_piece(p3, b3, piece, n_pieces, WARPS, ASM)
    _prefetch_piece(p4, b4, piece, n_pieces, WARPS, ASM)


def weight_planes(packed, spare: torch.Tensor) -> tuple:
    """prefetch_weight_piece's planes and their bytes for a PackedWeight (MAX_PLANES of each,
    the missing ones `spare` with 0 bytes), or for None every plane `spare` with 0 bytes."""
    planes = [] if packed is None else list(packed.planes.values())[:MAX_PLANES]
    sizes = [p.numel() * p.element_size() for p in planes]
    planes += [spare] * (MAX_PLANES - len(planes))
    sizes += [0] * (MAX_PLANES - len(sizes))
    return (*planes, *sizes)
