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


def _prologue_reference(x, positions, rope, bias, q_weight, k_weight, n_q, n_rot_heads, eps):
    """The launches the fused RoPE replaces, in numpy: bias, each head's RMSNorm (Q's heads
    by q_weight, K's by k_weight), RoPE over heads 0..n_rot_heads-1; the rest copied."""
    _, h, d = x.shape
    y = x + (bias.reshape(1, h, d) if bias is not None else 0.0)
    out = y.copy()
    rot = y[:, :n_rot_heads]
    if q_weight is not None:
        rot = np.concatenate(
            [reference.rms_norm(rot[:, :n_q], q_weight, eps),
             reference.rms_norm(rot[:, n_q:], k_weight, eps)], axis=1,
        )  # fmt: skip
    out[:, :n_rot_heads] = reference.rope(
        rot, positions, rope.inv_freq, rope.n_rot, rope.neox, rope.mscale
    )
    return out


@pytest.mark.parametrize("layout", ["normal", "neox"])
@pytest.mark.parametrize(("with_bias", "with_norm", "n_v"), [
    (False, True, 0),  # Qwen3: Q and K normed per head
    (True, False, 3),  # gpt-oss: Q, K and V biased; V's heads copied, not rotated
    (True, True, 2),
])  # fmt: skip
def test_bias_and_head_norms_fused_before_the_rotation(layout, with_bias, with_norm, n_v,
                                                       device):  # fmt: skip
    """6 query heads, 3 key heads (odd: the masked tail of a program's heads), n_v value heads
    passed through; the joined Q|K|V output of one GEMV is a strided view, as in the engine."""
    from kernels.rope import QKNorms

    rope = Rope.from_gguf_params(32, 32, 10000.0, layout=layout)
    gen = torch.Generator().manual_seed(3)
    n_q, n_k, d = 6, 3, 32
    h = n_q + n_k + n_v
    wide = torch.randn(3, h * d + 8, generator=gen) * 2.0  # a row longer than the heads
    x = wide[:, : h * d].view(3, h, d)
    positions = torch.tensor([0, 5, 3000])
    bias = torch.randn(h * d, generator=gen) if with_bias else None
    qw = torch.rand(d, generator=gen) + 0.5
    kw = torch.rand(d, generator=gen) + 0.5
    norms = QKNorms(qw.to(device), kw.to(device), n_q, 1e-6) if with_norm else None
    got = apply_rope(
        x.to(device), positions, rope, bias=None if bias is None else bias.to(device),
        norms=norms, n_rotated=n_q + n_k,
    )  # fmt: skip
    expected = _prologue_reference(
        x.numpy(), positions.numpy(), rope, None if bias is None else bias.numpy(),
        qw.numpy() if with_norm else None, kw.numpy(), n_q, n_q + n_k, 1e-6,
    )  # fmt: skip
    np.testing.assert_allclose(got.cpu().numpy(), expected, atol=ATOL, rtol=1e-4)


def test_fused_prologue_keeps_f16_and_refuses_a_bias_of_the_wrong_size(device):
    rope = Rope.from_gguf_params(32, layout="neox")
    x = torch.randn(1, 4, 32).half().to(device)
    from kernels.rope import QKNorms

    norms = QKNorms(torch.ones(32, device=device), torch.ones(32, device=device), 2, 1e-6)
    assert apply_rope(x, torch.tensor([1]), rope, norms=norms).dtype == torch.float16
    with pytest.raises(UnsupportedTensor, match="bias of 64 values for 4 heads"):
        apply_rope(x, torch.tensor([1]), rope, bias=torch.zeros(64, device=device))
