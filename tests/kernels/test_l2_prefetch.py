"""kernels/l2_prefetch.py: the pieces a span is cut into (one a warp) cover its whole 16-byte
words, none twice, nothing outside it; a matrix's planes and their bytes. The prefetch itself
is inline assembly (a GPU's); what it asks for is what is checked here."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels import moe_reference as ref
from kernels.l2_prefetch import l2_pieces, weight_planes
from kernels.packed_weight import PackedWeight


@triton.jit
def _pieces_kernel(out, start_byte, n_bytes, WARPS: tl.constexpr):
    start, words = l2_pieces(start_byte, n_bytes, WARPS)
    lane = tl.arange(0, 32 * WARPS)
    tl.store(out + lane * 2, start)
    tl.store(out + lane * 2 + 1, words)


def _words_asked(start_byte: int, n_bytes: int, warps: int, device: str) -> list[int]:
    out = torch.zeros(32 * warps * 2, dtype=torch.int64, device=device)
    _pieces_kernel[(1,)](out, start_byte, n_bytes, WARPS=warps, num_warps=warps)
    rows = out.cpu().reshape(warps, 32, 2)
    assert (rows == rows[:, :1]).all(), "a warp's lanes hold one piece"
    words = []
    for start, length in rows[:, 0].tolist():
        words += range(start, start + length)
    return words


@pytest.mark.parametrize(
    ("start_byte", "n_bytes", "warps"),
    [(0, 4096, 4), (16, 1000, 2), (7, 100, 4), (4096, 15, 2), (100, 0, 1), (12288 * 3, 12288, 8),
     (3, 33, 4), (0, 16 * 5, 8)],
)  # fmt: skip
def test_pieces_cover_the_whole_words_inside_the_span_once(start_byte, n_bytes, warps, device):
    words = _words_asked(start_byte, n_bytes, warps, device)
    first, end = -(-start_byte // 16), (start_byte + n_bytes) // 16
    assert sorted(words) == list(range(first, max(first, end)))
    assert len(set(words)) == len(words)


def test_weight_planes_give_each_planes_bytes():
    raw = ref.random_expert_bytes("Q6_K", 4, 32, 256, 0)
    packed = PackedWeight.from_gguf(raw, "Q6_K", (4 * 32, 256), device="cpu")
    spare = torch.zeros(1)
    args = weight_planes(packed, spare)
    planes, sizes = args[:5], args[5:]
    assert sum(sizes) == packed.nbytes == len(raw)
    for plane, size in zip(planes, sizes, strict=True):
        if size:
            assert plane.numel() * plane.element_size() == size
        else:
            assert plane is spare
    assert weight_planes(None, spare) == (spare,) * 5 + (0,) * 5
