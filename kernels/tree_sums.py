"""Sums along a tile's rows in an order the source fixes, not the tile's layout.

`tl.sum` adds a row's values in the order its layout gives them to threads and warps, and
Triton picks the layout per kernel. Two kernels that must give the same bits for the same row
(the expert downs of moe_gemv.py and moe_one_token.py) sum with `tree_sum` instead:
neighbours, then neighbouring pairs, and so on, each level an elementwise add of two halves.
Each level moves the tile to a layout that holds the pair in one thread: cheap on a small
tile after the dot products, costly across a whole row of a hot kernel (RoPE's head norms:
docs/decisions/2026-11-30-kv-write-in-the-attention.md).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _halves_added(t, R: tl.constexpr, WIDTH: tl.constexpr):
    """[R, WIDTH] -> [R, WIDTH / 2]: columns 2i and 2i + 1 added."""
    a, b = tl.split(tl.reshape(t, (R, WIDTH // 2, 2)))
    return a + b


@triton.jit
def tree_sum(t, R: tl.constexpr, W: tl.constexpr):
    """[R, W] -> [R]: each row's sum (W a power of two, at most 128) in the tree the source
    fixes (the module docstring)."""
    if W >= 128:
        t = _halves_added(t, R, 128)
    if W >= 64:
        t = _halves_added(t, R, 64)
    if W >= 32:
        t = _halves_added(t, R, 32)
    if W >= 16:
        t = _halves_added(t, R, 16)
    if W >= 8:
        t = _halves_added(t, R, 8)
    if W >= 4:
        t = _halves_added(t, R, 4)
    if W >= 2:
        t = _halves_added(t, R, 2)
    return tl.reshape(t, (R,))
