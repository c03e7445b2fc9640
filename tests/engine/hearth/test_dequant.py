"""engine.hearth.dequant against gguf's numpy dequantizers, every format, on the CPU (the
planes are plain tensors; the same torch code runs on the GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.hearth.dequant import dequantize
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
