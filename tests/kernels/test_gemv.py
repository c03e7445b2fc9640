"""quant_matmul against gguf's numpy dequantizer, every format, odd shapes, 1..16 rows."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.errors import UnsupportedTensor
from kernels.gemv import default_config, quant_matmul
from kernels.ggml_formats import FORMATS
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

# Relative error against float64 arithmetic: f32 inputs are exact up to f32 sums; f16/bf16
# inputs are rounded, and the 2..16-row path multiplies weights rounded to the input's dtype.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
# The integer path (Q4_K/Q6_K, one row) computes x' @ W.T with x' = x rounded to 8 bits per 32
# values (act_quant.py); against that reference it is exact up to float32 sums and a rare
# rounding tie that the GPU's fused multiply-add decides the other way (one q off by one).
TOLERANCE_INT8 = 5e-4


def _expected(x: torch.Tensor, raw, fmt: str, shape) -> tuple[np.ndarray, float | None]:
    """The float64 reference for quant_matmul's default path, and its tolerance (None: the
    caller's per-dtype one)."""
    x2 = x.float().reshape(-1, shape[1]).numpy()
    if default_config(fmt, x2.shape[0]).path == "dp4a":
        x2 = reference.quantize_activation(x2)
        return reference.gemv(x2, raw, fmt, shape).reshape(*x.shape[:-1], shape[0]), TOLERANCE_INT8
    return reference.gemv(x2, raw, fmt, shape).reshape(*x.shape[:-1], shape[0]), None


FORMAT_NAMES = [
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "F16",
    "BF16",
    "F32",
]


def _odd_inputs(fmt: str) -> int:
    block = FORMATS[fmt].block_size
    # whole blocks, an odd count of them, and (for the float kernel) not a multiple of 64
    return 3 * block if block > 1 else 200


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("rows", [1, 5])
def test_matches_gguf_dequantizer(fmt, rows, device):
    n_out, n_in = 37, _odd_inputs(fmt)
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=rows)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(rows))
    y = quant_matmul(x.to(device), w)
    expected, tolerance = _expected(x, raw, fmt, (n_out, n_in))
    assert y.shape == (rows, n_out)
    assert relative_error(y.cpu(), expected) < (tolerance or TOLERANCE[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 16])
def test_half_inputs(dtype, rows, device):
    n_out, n_in = 19, 512
    raw = reference.random_weight_bytes("Q4_K", n_out, n_in, seed=3)
    w = PackedWeight.from_gguf(raw, "Q4_K", (n_out, n_in), device=device)
    x = torch.randn(rows, n_in).to(dtype)
    y = quant_matmul(x.to(device), w)
    assert y.dtype == dtype
    expected, tolerance = _expected(x, raw, "Q4_K", (n_out, n_in))
    # the output's own rounding to f16/bf16 comes on top of the integer path's
    assert relative_error(y.float().cpu(), expected) < (tolerance or 0) + TOLERANCE[dtype]


def test_more_rows_than_one_tile_and_leading_dims(device):
    n_out, n_in = 24, 64
    raw = reference.random_weight_bytes("Q8_0", n_out, n_in, seed=4)
    w = PackedWeight.from_gguf(raw, "Q8_0", (n_out, n_in), device=device)
    x = torch.randn(3, 7, n_in)  # 21 rows: two tiles of 16 on the tl.dot path
    y = quant_matmul(x.to(device), w)
    assert y.shape == (3, 7, n_out)
    expected = reference.gemv(x.numpy(), raw, "Q8_0", (n_out, n_in))
    assert relative_error(y.cpu(), expected) < TOLERANCE[torch.float32]


def test_planes_hold_the_same_bytes(device):
    raw = reference.random_weight_bytes("Q6_K", 5, 512, seed=5)
    w = PackedWeight.from_gguf(raw, "Q6_K", (5, 512), device=device)
    assert w.nbytes == raw.size
    np.testing.assert_array_equal(w.to_gguf_bytes(), raw)


def test_unsupported_type_is_named(device):
    with pytest.raises(UnsupportedTensor, match="IQ2_XXS"):
        PackedWeight.from_gguf(b"", "IQ2_XXS", (1, 256), device=device)


def test_partial_block_row_is_refused(device):
    with pytest.raises(UnsupportedTensor, match="not whole blocks of 256"):
        PackedWeight.from_gguf(b"", "Q4_K", (4, 300), device=device)


def test_wrong_byte_count_is_refused(device):
    with pytest.raises(UnsupportedTensor, match="needs 288 bytes"):
        PackedWeight.from_gguf(bytes(100), "Q4_K", (2, 256), device=device)


def test_input_width_mismatch_is_refused(device):
    raw = reference.random_weight_bytes("Q8_0", 4, 64)
    w = PackedWeight.from_gguf(raw, "Q8_0", (4, 64), device=device)
    with pytest.raises(UnsupportedTensor, match="64 inputs"):
        quant_matmul(torch.randn(1, 65).to(device), w)


@functools.lru_cache(maxsize=1)
def _full_size_case(fmt: str, shape: tuple[int, int]):
    raw = reference.random_weight_bytes(fmt, *shape, seed=6)
    dequantized = reference.dequantize_weight(raw, fmt, shape).astype(np.float64)
    return PackedWeight.from_gguf(raw, fmt, shape, device="cuda"), dequantized


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 4, 16])
@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@pytest.mark.parametrize("shape", [(1024, 4096), (4096, 14336)])
def test_llama3_8b_shapes(rows, fmt, shape):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    w, dequantized = _full_size_case(fmt, shape)
    x = torch.randn(rows, shape[1], dtype=torch.float16)
    y = quant_matmul(x.cuda(), w)
    x_used = x.double().numpy()
    tolerance = TOLERANCE[torch.float16]
    if default_config(fmt, rows).path == "dp4a":
        x_used, tolerance = (
            reference.quantize_activation(x.float().numpy()),
            TOLERANCE_INT8 + tolerance,
        )
    expected = x_used @ dequantized.T
    assert relative_error(y.float().cpu(), expected) < tolerance


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K", "Q8_0", "Q4_1", "Q5_0", "F16"])
@pytest.mark.parametrize("rows", [1, 3])
def test_whole_tiles_take_the_unmasked_path(fmt, rows, device):
    """Shapes that divide into whole tiles compile without bounds masks (EVEN)."""
    n_out, n_in = 32, 1024
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=7)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(8))
    y = quant_matmul(x.to(device), w)
    expected, tolerance = _expected(x, raw, fmt, (n_out, n_in))
    assert relative_error(y.cpu(), expected) < (tolerance or TOLERANCE[torch.float32])
