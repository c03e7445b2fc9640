"""kernels.gemv.gated_matmul: one row through gate and up joined, silu(gate) up and its 8-bit
form written by the GEMV's own launch (gemv_dp4a's GLU: the program that completes a group
of 32 computes it), in the bits of the product followed by swiglu_quantized."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from kernels import gemv, reference
from kernels.activations import swiglu_quantized
from kernels.gemv import gated_matmul, quant_matmul
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

# the engine's one-row tiles (4 rows a program; Q4_K with rows in the thread) and 8 rows a
# program (Q4_K's tall_rows, which Llama-3-8B's 28672-row gate/up takes)
CONFIGS = {
    "default": None,
    "8-rows": dataclasses.replace(gemv.integer_config("Q4_K"), block_n=8),
}


def _joined(fmt: str, n_ff: int, n_in: int, device: str, seed: int = 5):
    raw = reference.random_weight_bytes(fmt, 2 * n_ff, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, fmt, (2 * n_ff, n_in), device=device)
    x = torch.randn(1, n_in, generator=torch.Generator().manual_seed(seed + 1))
    return raw, w, x


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize(("fmt", "n_ff", "n_in"), [("Q4_K", 64, 512), ("Q6_K", 96, 256)])
def test_the_same_bits_as_the_product_then_swiglu_quantized(fmt, n_ff, n_in, config, device):
    raw, w, x = _joined(fmt, n_ff, n_in, device)
    cfg = CONFIGS[config]
    x = x.to(device)
    fused = gated_matmul(x, w, cfg)
    assert fused is not None
    y, yq = fused
    product = quant_matmul(x, w, cfg)
    y_apart, yq_apart = swiglu_quantized(product[:, :n_ff], product[:, n_ff:])
    assert y.shape == (1, n_ff)
    assert torch.equal(y, y_apart)
    for name in ("words", "scales", "sums"):
        assert torch.equal(getattr(yq, name), getattr(yq_apart, name)), name
    # the last program of each group set its counter back to zero for the next launch
    assert int(gemv._GLU_COUNTERS.get(y.device, 1).abs().sum()) == 0
    # against float64: x rounded to 8 bits as the GEMV rounds it, the activation exact
    dense = reference.dequantize_weight(raw, fmt, (2 * n_ff, n_in)).astype(np.float64)
    g, u = np.split(reference.quantize_activation(x.cpu().numpy()) @ dense.T, 2, axis=1)
    assert relative_error(y.cpu(), g / (1 + np.exp(-g)) * u) < 1e-3


def test_a_second_launch_gives_the_same_result(device):
    _, w, x = _joined("Q4_K", 64, 256, device, seed=8)
    first = gated_matmul(x.to(device), w)
    second = gated_matmul(x.to(device), w)
    assert torch.equal(first[0], second[0])
    assert torch.equal(first[1].words, second[1].words)


@pytest.mark.parametrize(
    ("fmt", "n_ff", "n_in", "rows", "why"),
    [
        ("Q4_K", 64, 256, 2, "two rows: a program a row would share no group counter"),
        ("Q8_0", 64, 256, 1, "not a dp4a format of this kernel"),
        ("Q4_K", 48, 256, 1, "n_ff of 48 is not whole groups of 32"),
        ("Q6_K", 64, 4608, 1, "18 super-blocks: split over two programs"),
        ("Q4_K", 64, 4608, 1, "18 super-blocks: a K loop (long_rows)"),
    ],
)
def test_shapes_its_launch_does_not_take_give_none(fmt, n_ff, n_in, rows, why, device):
    raw = reference.random_weight_bytes(fmt, 2 * n_ff, n_in, seed=2)
    w = PackedWeight.from_gguf(raw, fmt, (2 * n_ff, n_in), device=device)
    assert gated_matmul(torch.randn(rows, n_in).to(device), w) is None, why
