"""The dense quantized GEMM (kernels/packed_gemm.py) at Llama-3-8B's shapes, on the GPU
(compiled), with its default launch shapes: the first rows against gguf's dequantizer
(kernels.reference.dequantize_weight; products in float64, x in f16), every row against the
prefill's path (kernels/dequant.py's f16 matrix through torch's GEMM), at a batch's decode
step (64 rows, and 40: a part block) and a prefill chunk (512)."""

from __future__ import annotations

import functools

import pytest
import torch

from kernels import reference
from kernels.dequant import dequantize
from kernels.packed_gemm import quant_gemm
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

pytestmark = pytest.mark.gpu

SHAPES = [("Q4_K", (4096, 4096)), ("Q4_K", (14336, 4096)), ("Q6_K", (4096, 14336))]
CHECKED = 4  # rows against the float64 reference
TOLERANCE = 4e-3  # f16 x and weights, float32 sums (the f16 GEMM's too)


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@functools.lru_cache(maxsize=3)
def _weight(fmt: str, shape: tuple[int, int]):
    """The PackedWeight and gguf's dequantization of it (float32 on the GPU: the float64
    reference products are taken there, one dequantization a shape)."""
    raw = reference.random_weight_bytes(fmt, *shape, seed=11)
    dense = torch.from_numpy(reference.dequantize_weight(raw, fmt, shape)).cuda()
    return dense, PackedWeight.from_gguf(raw, fmt, shape, device="cuda")


@pytest.mark.parametrize("rows", [40, 64, 512])
@pytest.mark.parametrize(("fmt", "shape"), SHAPES)
def test_llama3_8b_shapes(fmt, shape, rows):
    dense, w = _weight(fmt, shape)
    x = torch.randn(rows, shape[1], generator=torch.Generator().manual_seed(rows))
    x = x.half().cuda()
    y = quant_gemm(x, w)
    assert y.dtype == torch.float16
    expected = (x[:CHECKED].double() @ dense.double().T).cpu().numpy()
    assert relative_error(y[:CHECKED].float().cpu(), expected) < TOLERANCE
    prefill = (x @ dequantize(w, torch.float16).T).double().cpu().numpy()
    assert relative_error(y.float().cpu(), prefill) < TOLERANCE
