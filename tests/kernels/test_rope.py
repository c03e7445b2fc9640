"""RoPE kernel against the numpy reference: both layouts, partial rotary dims, every scaling
type; and the tables against values worked out independently."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.errors import UnsupportedTensor
from kernels.rope import apply_rope
from kernels.rope_tables import Rope, llama3_freq_factors

SCALINGS = [
    ("none", {}),
    ("linear", {"factor": 4.0}),
    ("yarn", {"factor": 4.0, "original_context": 4096}),
    ("llama3", {"factor": 8.0, "original_context": 8192}),
]
# The angle pos * inv_freq is float32 in the kernel (as in ggml): at position 4000 that is
# about 4e-4 radians of rounding.
ATOL = 1e-3


@pytest.mark.parametrize("layout", ["normal", "neox"])
@pytest.mark.parametrize(("scaling", "params"), SCALINGS)
@pytest.mark.parametrize("n_rot", [64, 32])
def test_matches_reference(layout, scaling, params, n_rot, device):
    rope = Rope.from_gguf_params(64, n_rot, 500000.0, layout=layout, scaling=scaling, **params)
    x = torch.randn(5, 3, 64)
    positions = torch.tensor([0, 1, 7, 100, 4000])
    y = apply_rope(x.to(device), positions, rope)
    expected = reference.rope(
        x.numpy(), positions.numpy(), rope.inv_freq, n_rot, rope.neox, rope.mscale
    )
    np.testing.assert_allclose(y.cpu().numpy(), expected, atol=ATOL)
    if n_rot < 64:  # dims past n_rot pass through
        np.testing.assert_array_equal(y[..., n_rot:].cpu().numpy(), x[..., n_rot:].numpy())


def test_f16_input_keeps_its_dtype(device):
    rope = Rope.from_gguf_params(32, layout="neox")
    x = torch.randn(2, 4, 32).half()
    y = apply_rope(x.to(device), torch.tensor([3, 9]), rope)
    assert y.dtype == torch.float16
    expected = reference.rope(x.float().numpy(), np.array([3, 9]), rope.inv_freq, 32, True)
    np.testing.assert_allclose(y.float().cpu().numpy(), expected, atol=5e-3)


def test_linear_scaling_divides_the_frequencies():
    plain = Rope.from_gguf_params(128, base=10000.0)
    linear = Rope.from_gguf_params(128, base=10000.0, scaling="linear", factor=4.0)
    np.testing.assert_allclose(linear.inv_freq, plain.inv_freq / 4.0)


def test_yarn_keeps_high_frequencies_and_interpolates_low_ones():
    plain = Rope.from_gguf_params(128, base=10000.0)
    yarn = Rope.from_gguf_params(128, scaling="yarn", factor=4.0, original_context=4096)
    assert yarn.inv_freq[0] == plain.inv_freq[0]  # fastest pair: extrapolated
    assert yarn.inv_freq[-1] == pytest.approx(plain.inv_freq[-1] / 4.0)  # slowest: scaled
    assert yarn.mscale == pytest.approx(1.0 + 0.1 * math.log(4.0))


def test_llama3_factors_follow_llama31():
    # Llama 3.1 8B: base 500000, factor 8, low 1, high 4, original context 8192
    factors = llama3_freq_factors(128, 500000.0, 8.0, 8192, 1.0, 4.0)
    assert factors[0] == 1.0  # wavelength 2*pi, far below 8192/4
    assert factors[-1] == 8.0  # wavelength beyond 8192
    middle = (factors > 1.0) & (factors < 8.0)
    assert middle.any()  # the smooth band between


def test_unknown_scaling_is_named():
    with pytest.raises(UnsupportedTensor, match="'longrope'"):
        Rope.from_gguf_params(128, scaling="longrope")


@pytest.mark.parametrize(("n_tokens", "n_heads"), [(1, 40), (300, 3)])
def test_head_grid_matches_reference(n_tokens, n_heads, device):
    """A program per head for decode (1 token x 40 heads: Llama-3-8B's Q and K), several heads
    a program once tokens alone give programs enough (300 x 3: 4 heads, one masked)."""
    rope = Rope.from_gguf_params(64, 64, 500000.0, layout="normal")
    x = torch.randn(n_tokens, n_heads, 64)
    positions = torch.arange(n_tokens) * 13 + 5
    y = apply_rope(x.to(device), positions, rope)
    expected = reference.rope(
        x.numpy(), positions.numpy(), rope.inv_freq, 64, rope.neox, rope.mscale
    )
    np.testing.assert_allclose(y.cpu().numpy(), expected, atol=ATOL)
