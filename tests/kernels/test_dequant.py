"""kernels.dequant (Q4_K, Q6_K to f16 in one pass) against gguf's numpy dequantizers; on the
CPU through Triton's interpreter, on the GPU with a Llama-3-8B-sized matrix too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels.dequant import FORMATS, dequantize_k_quant
from kernels.packed_weight import PackedWeight
from kernels.reference import dequantize_weight, random_weight_bytes

from .conftest import DEVICE


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(3, 512), (5, 256)])
def test_matches_gguf(fmt, shape):
    raw = random_weight_bytes(fmt, *shape, seed=shape[0])
    expected = dequantize_weight(raw, fmt, shape)
    packed = PackedWeight.from_gguf(raw, fmt, shape, device=DEVICE)
    got = dequantize_k_quant(packed, torch.float32).cpu().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    half = dequantize_k_quant(packed).cpu().numpy()  # f16, the GEMM's operand
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, expected, rtol=2e-3, atol=1e-3 * np.abs(expected).max())


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="the full shape runs on the GPU only")
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_full_size_matrix(fmt):
    shape = (4096, 14336)
    raw = random_weight_bytes(fmt, *shape, seed=1)
    packed = PackedWeight.from_gguf(raw, fmt, shape, device="cuda")
    got = dequantize_k_quant(packed, torch.float32)
    rows = [0, 1234, 4095]
    expected = dequantize_weight(raw.reshape(shape[0], -1)[rows].reshape(-1), fmt, (3, shape[1]))
    np.testing.assert_allclose(got[rows].cpu().numpy(), expected, rtol=1e-6, atol=1e-7)
