"""RMSNorm (+ residual) and SwiGLU against the numpy reference, per dtype, odd widths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.activations import swiglu
from kernels.errors import UnsupportedTensor
from kernels.norms import rms_norm
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


def test_swiglu_shape_mismatch_is_named(device):
    with pytest.raises(UnsupportedTensor, match="differ in shape"):
        swiglu(torch.randn(2, 3).to(device), torch.randn(3, 2).to(device))
