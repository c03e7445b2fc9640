"""kernels.dequant_torch against gguf's numpy dequantizers, every format, on the CPU (the
planes are plain tensors; the same torch code runs on the GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels.dequant_torch import dequantize, dequantize_mxfp4
from kernels.packed_weight import PackedWeight
from kernels.reference import dequantize_weight, random_weight_bytes

FORMATS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16", "F32"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_dequantize_matches_gguf(fmt):
    n_out, n_in = 3, 512
    raw = random_weight_bytes(fmt, n_out, n_in, seed=FORMATS.index(fmt))
    expected = dequantize_weight(raw, fmt, (n_out, n_in))
    packed = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device="cpu")
    got = dequantize(packed, torch.float32).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())


def test_unknown_planes_are_refused():
    from kernels.errors import UnsupportedTensor

    raw = random_weight_bytes("Q4_K", 2, 256)
    packed = PackedWeight.from_gguf(raw, "Q4_K", (2, 256), device="cpu")
    relaid = PackedWeight(packed.fmt, 2, 256, {"words": packed.planes["qs"]})
    with pytest.raises(UnsupportedTensor):
        dequantize(relaid)


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
