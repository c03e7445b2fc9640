"""RMSNorm (+ residual) and SwiGLU against the numpy reference, per dtype, odd widths; their
fused 8-bit outputs against quantize_activation of the same values, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.act_quant import quantize_activation
from kernels.activations import swiglu, swiglu_quantized
from kernels.errors import UnsupportedTensor
from kernels.norms import rms_norm, rms_norm_quantized
from tests.kernels.conftest import relative_error

TOLERANCE = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("width", [1, 100, 576])
def test_rms_norm(dtype, width, device):
    x = torch.randn(3, width).to(dtype)
    w = torch.randn(width).to(dtype)
    y = rms_norm(x.to(device), w.to(device), 1e-5)
    assert y.dtype == dtype
    expected = reference.rms_norm(x.float().numpy(), w.float().numpy(), 1e-5)
    assert relative_error(y.float().cpu(), expected) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rms_norm_with_residual(dtype, device):
    x, r = torch.randn(2, 3, 96).to(dtype), torch.randn(2, 3, 96).to(dtype)
    w = torch.randn(96).to(dtype)
    y, h = rms_norm(x.to(device), w.to(device), 1e-6, residual=r.to(device))
    summed = x.float() + r.float()
    assert relative_error(h.float().cpu(), summed.numpy()) < TOLERANCE[dtype]
    expected = reference.rms_norm(summed.numpy(), w.float().numpy(), 1e-6)
    assert relative_error(y.float().cpu(), expected) < TOLERANCE[dtype]


@pytest.mark.parametrize("quantized", [False, True])
def test_rms_norm_adds_a_float32_bias_before_the_residual(quantized, device):
    """x f16 + a float32 bias [N] (the attention output's, gpt-oss) + residual, summed in
    float32 in the norm's launch: h as the sum rounded once, y in x's dtype, the 8-bit y
    the same as without the bias on the summed values."""
    gen = torch.Generator().manual_seed(3)
    x, r = (torch.randn(2, 96, generator=gen).half() for _ in range(2))
    b, w = torch.randn(96, generator=gen), torch.randn(96, generator=gen).half()
    args = (x.to(device), w.to(device), 1e-6, r.to(device))
    if quantized:
        y, h, yq = rms_norm_quantized(*args, bias=b.to(device))
    else:
        y, h = rms_norm(*args, bias=b.to(device))
    summed = x.float() + b + r.float()
    assert y.dtype == torch.float16 and h.dtype == torch.float16
    assert torch.equal(h.cpu(), summed.half())
    expected = reference.rms_norm(summed.numpy(), w.float().numpy(), 1e-6)
    assert relative_error(y.float().cpu(), expected) < TOLERANCE[torch.float16]
    if quantized:
        _assert_same_quantization(yq, quantize_activation(y))
    with pytest.raises(UnsupportedTensor, match="bias of shape"):
        rms_norm(*args, bias=torch.zeros(95, device=device))


def test_rms_norm_weight_mismatch_is_named(device):
    with pytest.raises(UnsupportedTensor, match="weight of shape"):
        rms_norm(torch.randn(2, 8).to(device), torch.randn(9).to(device), 1e-5)


@pytest.mark.parametrize("dtype", list(TOLERANCE))
def test_swiglu(dtype, device):
    gate, up = torch.randn(3, 1000).to(dtype) * 4, torch.randn(3, 1000).to(dtype)
    y = swiglu(gate.to(device), up.to(device))
    expected = reference.swiglu(gate.float().numpy(), up.float().numpy())
    assert y.dtype == dtype
    assert relative_error(y.float().cpu(), expected) < TOLERANCE[dtype]
    assert np.isfinite(y.float().cpu().numpy()).all()


def test_swiglu_reads_the_columns_of_a_joined_product_in_place(device):
    """gate and up as the two halves of one gate|up product at several rows (views, rows
    2000 apart): the same bits as their contiguous copies."""
    joined = (torch.randn(3, 2000, generator=torch.Generator().manual_seed(5)) * 4).to(device)
    gate, up = joined[:, :1000], joined[:, 1000:]
    y = swiglu(gate, up)
    assert y.shape == (3, 1000)
    assert torch.equal(y, swiglu(gate.contiguous(), up.contiguous()))


def test_swiglu_shape_mismatch_is_named(device):
    with pytest.raises(UnsupportedTensor, match="differ in shape"):
        swiglu(torch.randn(2, 3).to(device), torch.randn(3, 2).to(device))


def _assert_same_quantization(actual, expected):
    """Codes, scales and sums bit for bit (the fused kernels and quantize_activation share
    act_quant.quantize_values, so any difference is a bug in where values are stored)."""
    for name in ("words", "scales", "sums"):
        a, e = getattr(actual, name).cpu(), getattr(expected, name).cpu()
        assert a.shape == e.shape, name
        assert torch.equal(a, e), f"{name}: {(a != e).sum()} of {a.numel()} differ"


def _fused_norm_cases():
    # widths with a masked tail group in the kernel's block (96 of 128), a whole block (256),
    # residual or not, f32 -> f16 output (the forward pass's first norm)
    return [
        (torch.float16, 96, True, None),
        (torch.float16, 256, False, None),
        (torch.float32, 160, True, torch.float16),
        (torch.float32, 64, False, torch.float16),
    ]


@pytest.mark.parametrize(("dtype", "width", "residual", "out_dtype"), _fused_norm_cases())
def test_rms_norm_quantized_is_the_norm_then_its_quantization(
    dtype, width, residual, out_dtype, device
):
    x = (torch.randn(3, width) * 3).to(dtype).to(device)
    w = torch.randn(width).to(dtype).to(device)
    r = torch.randn(3, width).to(dtype).to(device) if residual else None
    y, h, yq = rms_norm_quantized(x, w, 1e-5, r, out_dtype=out_dtype)
    plain = rms_norm(x, w, 1e-5, residual=r)
    y_plain = plain[0] if residual else plain
    assert y.dtype == (out_dtype or dtype)
    # the same float32 values, rounded once to y's dtype
    assert torch.equal(y.cpu(), y_plain.to(y.dtype).cpu())
    if residual:
        assert torch.equal(h.cpu(), plain[1].cpu())
    else:
        assert h is None
    _assert_same_quantization(yq, quantize_activation(y))
    # and the codes mean y: x' = d q within half a step of each value
    words = yq.words.cpu().view(torch.int8).reshape(3, -1, 32).float()
    dequantized = (words * yq.scales.cpu()[..., None]).reshape(3, width)
    expected = reference.quantize_activation(y.float().cpu().numpy())
    np.testing.assert_allclose(dequantized.numpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape", [(2, 96), (1, 2048), (3, 1056)])
def test_swiglu_quantized_is_swiglu_then_its_quantization(shape, device):
    gate = (torch.randn(*shape) * 4).half().to(device)
    up = torch.randn(*shape).half().to(device)
    y, yq = swiglu_quantized(gate, up)
    assert torch.equal(y.cpu(), swiglu(gate, up).cpu())
    _assert_same_quantization(yq, quantize_activation(y))


def test_fused_quantization_needs_whole_groups(device):
    x = torch.randn(2, 48).to(device)
    with pytest.raises(UnsupportedTensor, match="whole 32s"):
        rms_norm_quantized(x, torch.randn(48).to(device), 1e-5)
    with pytest.raises(UnsupportedTensor, match="whole 32s"):
        swiglu_quantized(x, x)


@pytest.mark.gpu
def test_fused_quantization_at_llama_8b_widths(device):
    if device != "cuda":
        pytest.skip("full widths are for the GPU")
    x = torch.randn(1, 4096, device=device).half()
    r = torch.randn(1, 4096, device=device)
    y, _, yq = rms_norm_quantized(x, torch.randn(4096, device=device), 1e-5, r)
    _assert_same_quantization(yq, quantize_activation(y))
    gate, up = torch.randn(2, 1, 14336, device=device).half() * 4
    y, yq = swiglu_quantized(gate, up)
    _assert_same_quantization(yq, quantize_activation(y))
