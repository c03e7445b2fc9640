"""The dequantizing MMA GEMM (kernels/dequant_mma.py) against numpy in float64: the weights as
the kernel rounds them (reference.k_quant_f16_weights, x in f16), and gguf's weights within
those f16 roundings."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from kernels import dequant_mma, reference, split_k
from kernels.dequant_mma import DequantMmaConfig
from kernels.errors import UnsupportedTensor
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

EXACT = 1e-5  # against x16 @ W16.T: float32 sums of a few hundred exact f16 products

CASES = {  # (rows of x, n_out, n_in, config)
    "one-row": (1, 64, 256, None),
    "ragged-n": (9, 96, 512, None),  # a tile of 64 weight rows half past n_out
    # two tiles of x's rows (the second 1 of 16), split-K reduced by tickets
    "split-k": (17, 64, 512, DequantMmaConfig(block_m=16, block_n=32, split_k=2)),
    # 3 super-blocks in parts of 2 and 1, tiles of 32 rows of x
    "uneven-split": (20, 64, 768, DequantMmaConfig(block_m=32, split_k=2)),
}


@functools.lru_cache(maxsize=4)
def _case(fmt, rows, n_out, n_in, device, seed=0):
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed + 1))
    return w, x, raw


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_the_f16_weights_are_gguf_s_within_f16_rounding(fmt):
    """reference.k_quant_f16_weights reads the blocks as gguf does: its weights differ from
    gguf's by the f16 roundings of scale, offset and weight (each 2^-11 of its value) only."""
    raw = reference.random_weight_bytes(fmt, 8, 512, seed=3)
    exact = reference.dequantize_weight(raw, fmt, (8, 512)).astype(np.float64)
    w16 = reference.k_quant_f16_weights(raw, fmt, (8, 512))
    assert 1e-5 < relative_error(w16, exact) < 1e-3
    assert (w16.astype(np.float16).astype(np.float64) == w16).all()


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_numpy(fmt, case, device):
    rows, n_out, n_in, config = CASES[case]
    w, x, raw = _case(fmt, rows, n_out, n_in, device)
    y = dequant_mma.dequant_mma(x.to(device), w, config).cpu()
    assert y.shape == (rows, n_out) and y.dtype == torch.float32
    x16 = x.half().double().numpy()
    assert relative_error(y, x16 @ reference.k_quant_f16_weights(raw, fmt, (n_out, n_in)).T) < EXACT
    # gguf's weights and x as given: the f16 roundings of both (about 1e-3 of a product)
    exact = x.double().numpy() @ reference.dequantize_weight(raw, fmt, (n_out, n_in)).T
    assert relative_error(y, exact) < 2e-3


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_split_k_counters_reset_for_the_next_call(fmt, device):
    """The last program of each tile resets its ticket counter: a second call gives the same
    bits, and the counters are back at zero."""
    rows, n_out, n_in, config = CASES["split-k"]
    w, x, _ = _case(fmt, rows, n_out, n_in, device)
    first = dequant_mma.dequant_mma(x.to(device), w, config)
    second = dequant_mma.dequant_mma(x.to(device), w, config)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert int(split_k.COUNTERS.get(first.device, 1).abs().sum()) == 0


def test_the_default_splits_k_below_two_programs_an_sm():
    """132 SMs: 64 tiles of a 4096-row matrix in 4 parts; 16 tiles of 1024 rows in 8 (parts
    of 2 of its 16 super-blocks); 224 tiles of 14336 rows in 2 at 16 rows (two parts at
    least there) and 112 tiles of 128 rows in 2 at 64; rows of x in one block of 16, 32 or
    64."""
    assert dequant_mma.default_config(16, 4096, 4096).split_k == 4
    assert dequant_mma.default_config(64, 1024, 4096).split_k == 8
    assert dequant_mma.default_config(12, 14336, 4096).split_k == 2
    assert dequant_mma.default_config(64, 14336, 4096).split_k == 2
    assert dequant_mma.default_config(24, 14336, 4096).split_k == 1
    assert [dequant_mma.default_config(m, 4096, 4096).block_m for m in (2, 9, 16, 24, 48, 64)] == [
        16, 16, 16, 32, 64, 64,
    ]  # fmt: skip


def test_the_default_launch_shape_per_class_is_the_sweeps_winner():
    """The H200 sweep's winners (default_config's docstring): ffn_gate/up at 64 rows in tiles
    of 128 rows on 8 warps, the other 64-row matrices in two stages, ffn_down at 16 rows in
    tiles of 128 rows split in 8."""
    shape = lambda c: (c.block_m, c.block_n, c.num_warps, c.num_stages, c.split_k)  # noqa: E731
    assert shape(dequant_mma.default_config(64, 14336, 4096)) == (64, 128, 8, 3, 2)
    assert shape(dequant_mma.default_config(64, 4096, 4096)) == (64, 64, 4, 2, 4)
    assert shape(dequant_mma.default_config(48, 4096, 14336)) == (64, 64, 4, 2, 4)
    assert shape(dequant_mma.default_config(16, 4096, 14336)) == (16, 64, 4, 3, 8)
    assert shape(dequant_mma.default_config(4, 14336, 4096)) == (16, 64, 4, 3, 2)
    assert shape(dequant_mma.default_config(32, 4096, 4096)) == (32, 64, 4, 3, 4)


def test_half_precision_in_and_out_and_leading_dimensions(device):
    rows, n_out, n_in, _ = CASES["ragged-n"]
    w, x, _ = _case("Q4_K", rows, n_out, n_in, device)
    flat = dequant_mma.dequant_mma(x.to(device), w)
    x16 = x.half().to(device)
    half = dequant_mma.dequant_mma(x16, w)
    assert half.dtype == torch.float16
    wide = dequant_mma.dequant_mma(x16, w, out_dtype=torch.float32)
    torch.testing.assert_close(wide, flat, rtol=0, atol=0)  # x is taken in f16 either way
    torch.testing.assert_close(half, wide.half(), rtol=0, atol=0)
    shaped = dequant_mma.dequant_mma(x[:8].reshape(2, 4, n_in).to(device), w)
    assert shaped.shape == (2, 4, n_out)
    torch.testing.assert_close(shaped.reshape(8, n_out), flat[:8], rtol=0, atol=0)
    assert dequant_mma.dequant_mma(x[:0].to(device), w).shape == (0, n_out)


def test_refuses_other_formats_and_mismatched_inputs(device):
    raw = reference.random_weight_bytes("Q8_0", 32, 256, seed=5)
    q8 = PackedWeight.from_gguf(raw, "Q8_0", (32, 256), device=device)
    with pytest.raises(UnsupportedTensor, match="Q4_K, Q6_K"):
        dequant_mma.dequant_mma(torch.randn(2, 256, device=device), q8)
    w, _, _ = _case("Q4_K", 1, 64, 256, device)
    with pytest.raises(UnsupportedTensor, match="inputs"):
        dequant_mma.dequant_mma(torch.randn(2, 512, device=device), w)


def test_rows_won_decides_which_rows_take_it(monkeypatch):
    """An empty table (nothing measured) takes nothing; a format's range takes its rows."""
    monkeypatch.setattr(dequant_mma, "ROWS_WON", {})
    assert not dequant_mma.takes("Q4_K", 16)
    monkeypatch.setattr(dequant_mma, "ROWS_WON", {"Q4_K": (9, 32)})
    assert [dequant_mma.takes("Q4_K", m) for m in (8, 9, 32, 33)] == [False, True, True, False]
    assert not dequant_mma.takes("Q6_K", 16)
    assert dequant_mma.takes("Q6_K", 16, dequant_mma.parse_rows("Q4_K:9-64, Q6_K:16-16"))
    assert dequant_mma.parse_rows("") == {}
    with pytest.raises(ValueError, match="FORMAT:FEWEST-MOST"):
        dequant_mma.parse_rows("Q4_K:9")


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [9, 16, 64])
@pytest.mark.parametrize(
    ("fmt", "shape"), [("Q4_K", (4096, 4096)), ("Q4_K", (1024, 4096)), ("Q6_K", (4096, 14336))]
)
def test_llama3_8b_shapes_on_the_gpu(fmt, shape, rows):
    """The default launch (wgmma, inline assembly, split-K on 4096 and 1024 rows) against the
    dequantized GEMM (KernelsOps.matmul's "dequant" path) and against its own plain-arithmetic
    codes (asm=False: at most one f16 unit apart a weight); twice, for the same bits."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from kernels.dequant import dequantize

    raw = reference.random_weight_bytes(fmt, *shape, seed=7)
    w = PackedWeight.from_gguf(raw, fmt, shape, device="cuda")
    x16 = torch.randn(rows, shape[1], device="cuda").half()
    y = dequant_mma.dequant_mma(x16, w, out_dtype=torch.float32)
    dense = (x16.float() @ dequantize(w, torch.float32).T).double().cpu()
    assert relative_error(y.cpu(), dense) < 2e-3  # the f16 weights' roundings
    plain = dequant_mma.dequant_mma(x16, w, DequantMmaConfig(asm=False), out_dtype=torch.float32)
    assert relative_error(y.cpu(), plain.double().cpu()) < 1e-4
    again = dequant_mma.dequant_mma(x16, w, out_dtype=torch.float32)
    torch.testing.assert_close(again, y, rtol=0, atol=0)
