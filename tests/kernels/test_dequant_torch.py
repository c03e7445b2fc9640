"""kernels.dequant_torch's MXFP4 (gpt-oss's experts, blocks as stored) against gguf's numpy
dequantizer and by hand (the packed formats: tests/kernels/test_dequant.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels.dequant_torch import dequantize_mxfp4


def _mxfp4_blocks(n_rows: int, n_in: int, seed: int) -> np.ndarray:
    """Random MXFP4 blocks, every exponent byte (the subnormal 0 and 1 too) and every code."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(n_rows, n_in // 32, 17), dtype=np.uint8)
    exponents = np.arange(blocks[..., 0].size) % 256
    blocks[..., 0] = exponents.reshape(blocks[..., 0].shape).astype(np.uint8)
    return blocks.reshape(n_rows, -1)


def test_mxfp4_matches_gguf():
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    raw = _mxfp4_blocks(16, 512, seed=3)  # 256 blocks: each exponent byte once
    expected = gguf_dequantize(raw, GGMLQuantizationType.MXFP4)
    got = dequantize_mxfp4(torch.from_numpy(raw), 512).numpy()
    assert got.shape == expected.shape == (16, 512)
    np.testing.assert_array_equal(got, expected)


def test_mxfp4_values_by_hand():
    """One block with exponent byte 128 (scale 2^(128 - 128) = 1: each weight is its table
    value), codes 0..15 in the low nibbles and 15..0 in the high ones."""
    block = np.zeros(17, dtype=np.uint8)
    block[0] = 128
    block[1:] = np.arange(16, dtype=np.uint8) | (np.arange(16, dtype=np.uint8)[::-1] << 4)
    got = dequantize_mxfp4(torch.from_numpy(block), 32).numpy()
    table = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
    np.testing.assert_array_equal(got, np.array(table + table[::-1], dtype=np.float32))


def test_mxfp4_refuses_partial_blocks():
    from kernels.errors import UnsupportedTensor

    with pytest.raises(UnsupportedTensor):
        dequantize_mxfp4(torch.zeros(17, dtype=torch.uint8), 30)
