"""The Q8_0 integer GEMV (kernels/gemv_q8_0.py) against numpy: x' @ W.T in float64 with x' the
8-bit x it computes with (tight), x @ W.T (what 8-bit activations cost: loose), the float path
beside it, and quant_matmul's choice of it at one row."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from kernels import gemv, gemv_q8_0, reference
from kernels.act_quant import quantize_activation
from kernels.availability import interpret_mode
from kernels.gemv import quant_matmul
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

EXACT = 5e-5  # against x' @ W.T: each block's integer sum exact, float32 for the rest
ACTIVATION_ERROR = 2e-2  # against x @ W.T: 8-bit x


def _case(n_out, n_in, rows, device, seed=0):
    raw = reference.random_weight_bytes("Q8_0", n_out, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, "Q8_0", (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed + 1))
    dequantized = reference.dequantize_weight(raw, "Q8_0", (n_out, n_in)).astype(np.float64)
    exact = reference.quantize_activation(x.numpy()) @ dequantized.T
    return w, x, exact, x.double().numpy() @ dequantized.T


@pytest.mark.parametrize(
    ("n_out", "n_in", "rows", "blocks_per_step"),
    [
        (10, 96, 1, 64),  # ragged rows, one step of 3 blocks (masked past the row)
        (8, 2880, 2, 64),  # gpt-oss's row: 90 blocks, two steps, the second 26 long
        (6, 512, 3, 4),  # four steps of 4 blocks, three input rows
    ],
)
def test_matches_references(n_out, n_in, rows, blocks_per_step, device):
    w, x, exact, unrounded = _case(n_out, n_in, rows, device)
    cfg = dataclasses.replace(gemv.Q8_0_INTEGER, blocks_per_tile=blocks_per_step)
    y = gemv_q8_0.matmul(x.to(device), w, cfg, None, not interpret_mode()).cpu()
    assert y.shape == (rows, n_out)
    assert relative_error(y, exact) < EXACT
    assert relative_error(y, unrounded) < ACTIVATION_ERROR


def test_a_shared_8_bit_x_gives_the_same_bits_and_rows_are_alike(device):
    """x quantized once by the caller (as the RMSNorm writes it) gives the bits of x quantized
    inside; and each row of a 3-row call is the one-row call on that row, bit for bit (a
    program per row: what a speculative check needs)."""
    w, x, _, _ = _case(12, 256, 3, device, seed=5)
    x = x.to(device)
    cfg = dataclasses.replace(gemv.Q8_0_INTEGER, blocks_per_tile=4)
    native = not interpret_mode()
    inside = gemv_q8_0.matmul(x, w, cfg, None, native)
    shared = gemv_q8_0.matmul(x, w, cfg, quantize_activation(x), native)
    torch.testing.assert_close(inside, shared, rtol=0, atol=0)
    for b in range(3):
        one = gemv_q8_0.matmul(x[b : b + 1], w, cfg, None, native)
        torch.testing.assert_close(one[0], inside[b], rtol=0, atol=0)


def test_quant_matmul_takes_it_for_q8_0_at_one_row(device):
    """One input row of a Q8_0 matrix takes the integer GEMV, within 8-bit x's error of the
    float path's result; two rows and more, and other 32-blocks, the float path."""
    assert gemv.default_config("Q8_0", 1) is gemv.Q8_0_INTEGER
    assert gemv.default_config("Q8_0", 2).path == "float"
    assert gemv.default_config("Q4_0", 1).path == "float"
    w, x, exact, _ = _case(9, 160, 1, device, seed=7)
    y = quant_matmul(x.to(device), w).cpu()
    assert relative_error(y, exact) < EXACT
    floats = quant_matmul(x.to(device), w, gemv.float_config("Q8_0", 1)).cpu()
    assert relative_error(y, floats.numpy()) < ACTIVATION_ERROR
