"""kernels.dequant against gguf's numpy dequantizers: `dequantize` for every format (the torch
formulas on the CPU, the one-pass kernel for the block formats on a GPU), the kernel itself (to
f16 in one pass) and `gather_rows` (the selected rows only, repeated and out of order) through
Triton's interpreter, on the GPU with a Llama-3-8B-sized matrix too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels.dequant import FORMATS, dequantize, dequantize_blocks, gather_rows
from kernels.errors import UnsupportedTensor
from kernels.packed_weight import PackedWeight
from kernels.reference import dequantize_weight, random_weight_bytes

from .conftest import DEVICE

ALL_FORMATS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4",
               "F16", "BF16", "F32"]  # fmt: skip


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_every_format_matches_gguf(fmt, device):
    n_out, n_in = 3, 512
    if fmt == "MXFP4":  # exponents of finite scales (a random byte would often give 2^100)
        from kernels.moe_reference import random_expert_bytes

        raw = random_expert_bytes(fmt, 1, n_out, n_in, seed=7)
    else:
        raw = random_weight_bytes(fmt, n_out, n_in, seed=ALL_FORMATS.index(fmt))
    expected = dequantize_weight(raw, fmt, (n_out, n_in))
    packed = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    got = dequantize(packed, torch.float32).cpu().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())


def test_unknown_planes_are_refused():
    raw = random_weight_bytes("Q4_K", 2, 256)
    packed = PackedWeight.from_gguf(raw, "Q4_K", (2, 256), device="cpu")
    relaid = PackedWeight(packed.fmt, 2, 256, {"words": packed.planes["qs"]})
    with pytest.raises(UnsupportedTensor, match="no device dequantizer"):
        dequantize(relaid)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(3, 512), (5, 256)])
def test_the_kernel_matches_gguf(fmt, shape):
    raw = random_weight_bytes(fmt, *shape, seed=shape[0])
    expected = dequantize_weight(raw, fmt, shape)
    packed = PackedWeight.from_gguf(raw, fmt, shape, device=DEVICE)
    got = dequantize_blocks(packed, torch.float32).cpu().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    half = dequantize_blocks(packed).cpu().numpy()  # f16, the GEMM's operand
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, expected, rtol=2e-3, atol=1e-3 * np.abs(expected).max())


def _random_packed(fmt, n_out, n_in, device, seed=3):
    if fmt == "MXFP4":  # exponents of finite scales (a random byte would often give 2^100)
        from kernels.moe_reference import random_expert_bytes

        raw = random_expert_bytes(fmt, 1, n_out, n_in, seed=seed)
    else:
        raw = random_weight_bytes(fmt, n_out, n_in, seed=seed)
    return raw, PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_gathered_rows_match_gguf(fmt):
    n_out, n_in = 7, 512
    raw, packed = _random_packed(fmt, n_out, n_in, DEVICE)
    table = dequantize_weight(raw, fmt, (n_out, n_in))
    ids = [5, 0, 5, 6, 2]  # repeated, out of order, the last row
    got = gather_rows(packed, torch.tensor(ids, device=DEVICE)).cpu().numpy()
    assert got.dtype == np.float32 and got.shape == (len(ids), n_in)
    np.testing.assert_allclose(got, table[ids], rtol=1e-6, atol=1e-6 * np.abs(table).max())


@pytest.mark.parametrize("fmt", ["Q4_K", "Q8_0"])
def test_gathering_one_row_is_one_launch(fmt, monkeypatch):
    """The decode step's embedding: the kernel alone, no torch op on the planes."""
    import kernels.dequant as dq

    _, packed = _random_packed(fmt, 4, 256, DEVICE)
    calls = []
    real = dq._blocks_kernel

    class Counting:
        def __getitem__(self, grid):
            calls.append(grid)
            return real[grid]

    monkeypatch.setattr(dq, "_blocks_kernel", Counting())
    monkeypatch.setattr(torch.Tensor, "index_select", None)  # any plane copy fails loudly
    gather_rows(packed, torch.tensor([3], device=DEVICE))
    assert len(calls) == 1


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="the full shape runs on the GPU only")
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_full_size_matrix(fmt):
    shape = (4096, 14336)
    raw = random_weight_bytes(fmt, *shape, seed=1)
    packed = PackedWeight.from_gguf(raw, fmt, shape, device="cuda")
    got = dequantize_blocks(packed, torch.float32)
    rows = [0, 1234, 4095]
    expected = dequantize_weight(raw.reshape(shape[0], -1)[rows].reshape(-1), fmt, (3, shape[1]))
    np.testing.assert_allclose(got[rows].cpu().numpy(), expected, rtol=1e-6, atol=1e-7)
    ids = torch.tensor(rows, device="cuda")
    np.testing.assert_allclose(gather_rows(packed, ids).cpu().numpy(), expected, rtol=1e-6,
                               atol=1e-7)  # fmt: skip
