"""The integer MMA GEMM (kernels/quant_mma.py) against numpy in float64 and against the integer
GEMV on the same rows.

Three references: x' @ W.T with x' = reference.quantize_activation(x) (what the kernel
computes); the integer GEMV (gemv_dp4a: the same integer sums, scaled in another order: float32
rounding apart); and x @ W.T, which the kernel may miss by what rounding x to 8 bits moves:
|x - x'| <= d / 2 per value (d = max|x| / 127 of its group of 32), so per output at most
sum_k |W[n, k]| d(k) / 2."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from kernels import gemv, quant_mma, reference, split_k
from kernels.act_quant import quantize_activation
from kernels.errors import UnsupportedTensor
from kernels.packed_weight import PackedWeight
from kernels.quant_mma import MmaConfig
from tests.kernels.conftest import relative_error

EXACT = 1e-5  # against x' @ W.T and the GEMV: float32 sums of a few hundred products

CASES = {  # (rows of x, n_out, n_in, config)
    "one-row": (1, 64, 256, None),
    "ragged-n": (9, 96, 512, None),  # a tile of 64 weight rows half past n_out
    # two tiles of x's rows (the second 1 of 16), split-K reduced by tickets
    "split-k": (17, 64, 512, MmaConfig(block_m=16, block_n=32, split_k=2)),
    # 2 pieces of 64 a loop step; 3 super-blocks in parts of 2 and 1
    "step-2": (17, 96, 768, MmaConfig(block_m=32, block_n=64, step=2, split_k=2)),
    "step-4": (9, 64, 512, MmaConfig(block_n=32, step=4)),  # a super-block a loop step
    # each piece's scales loaded in the piece itself, split-K
    "no-prefetch": (9, 64, 512, MmaConfig(prefetch=False, split_k=2)),
}


@functools.lru_cache(maxsize=4)
def _case(fmt, rows, n_out, n_in, device, seed=0):
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed + 1))
    dequantized = reference.dequantize_weight(raw, fmt, (n_out, n_in)).astype(np.float64)
    return w, x, dequantized


def _rounding_bound(x: np.ndarray, dequantized: np.ndarray) -> np.ndarray:
    """[rows, n_out]: the most that 8-bit x can move x @ W.T (module docstring)."""
    groups = np.abs(x.astype(np.float64)).reshape(x.shape[0], -1, 32)
    half_step = np.repeat(groups.max(axis=2) / 127.0 / 2.0, 32, axis=1)
    return half_step @ np.abs(dequantized).T


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_numpy_and_the_integer_gemv(fmt, case, device):
    rows, n_out, n_in, config = CASES[case]
    w, x, dequantized = _case(fmt, rows, n_out, n_in, device)
    y = quant_mma.quant_mma(x.to(device), w, config).cpu()
    assert y.shape == (rows, n_out) and y.dtype == torch.float32
    exact = reference.quantize_activation(x.numpy()) @ dequantized.T
    assert relative_error(y, exact) < EXACT
    # the integer GEMV on the first and last rows (each row is its own there; the
    # interpreter runs the GEMV slowly): the same integer sums, float32 rounding apart
    dp4a = gemv.default_config(fmt, 1)
    assert dp4a.path == "dp4a"
    ends = [0, rows - 1]
    by_gemv = gemv.quant_matmul(x[ends].to(device), w, dp4a).cpu()
    scale = float(by_gemv.abs().max())
    torch.testing.assert_close(y[ends], by_gemv, rtol=0, atol=EXACT * scale)
    # x @ W.T, within what 8-bit x can move it (plus float32 rounding)
    unrounded = x.numpy().astype(np.float64) @ dequantized.T
    bound = _rounding_bound(x.numpy(), dequantized)
    assert (np.abs(y.numpy() - unrounded) <= bound + EXACT * scale).all()
    assert relative_error(y, unrounded) > 1e-4  # x was rounded: the bound is the one that holds


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_split_k_counters_reset_for_the_next_call(fmt, device):
    """The last program of each tile resets its ticket counter: a second call gives the same
    bits, and the counters are back at zero."""
    rows, n_out, n_in, config = CASES["split-k"]
    w, x, _ = _case(fmt, rows, n_out, n_in, device)
    first = quant_mma.quant_mma(x.to(device), w, config)
    second = quant_mma.quant_mma(x.to(device), w, config)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert int(split_k.COUNTERS.get(first.device, 1).abs().sum()) == 0


def test_the_default_splits_k_only_below_one_wave_of_tiles():
    """64 tiles of a 4096-row matrix on 132 SMs: 2 parts; 16 tiles of 1024 rows: 8; 224 tiles
    of 14336 rows: none; a row of 2 super-blocks cannot be split."""
    assert quant_mma.default_config(16, 4096, 4096).split_k == 2
    assert quant_mma.default_config(64, 1024, 4096).split_k == 8
    assert quant_mma.default_config(64, 14336, 4096).split_k == 1
    assert quant_mma.default_config(16, 64, 512).split_k == 1
    assert [quant_mma.default_config(m, 4096, 4096).block_m for m in (1, 9, 17, 33, 200)] == [
        16, 16, 32, 64, 64,
    ]  # fmt: skip
    assert [quant_mma.default_config(m, 4096, 4096).num_warps for m in (16, 32, 64)] == [4, 4, 8]
    assert split_k.split_plan(3, 2) == (2, 2)  # 3 super-blocks: parts of 2 and 1


def test_a_given_quantized_input_and_half_precision(device):
    """x in f16 with its 8-bit form given (as a norm would write it): the same result as x
    quantized in the call; y in f16 by default, or float32 when asked."""
    rows, n_out, n_in, _ = CASES["ragged-n"]
    w, x, _ = _case("Q4_K", rows, n_out, n_in, device)
    x16 = x.half().to(device)
    own = quant_mma.quant_mma(x16, w)
    given = quant_mma.quant_mma(x16, w, quantized=quantize_activation(x16))
    assert own.dtype == torch.float16
    torch.testing.assert_close(own, given, rtol=0, atol=0)
    wide = quant_mma.quant_mma(x16, w, out_dtype=torch.float32)
    assert wide.dtype == torch.float32
    torch.testing.assert_close(wide.half(), own, rtol=0, atol=0)


def test_leading_dimensions_and_no_rows(device):
    rows, n_out, n_in, _ = CASES["ragged-n"]
    w, x, _ = _case("Q6_K", rows, n_out, n_in, device)
    flat = quant_mma.quant_mma(x.to(device), w)
    shaped = quant_mma.quant_mma(x[:8].reshape(2, 4, n_in).to(device), w)
    assert shaped.shape == (2, 4, n_out)
    torch.testing.assert_close(shaped.reshape(8, n_out), flat[:8], rtol=0, atol=EXACT)
    assert quant_mma.quant_mma(x[:0].to(device), w).shape == (0, n_out)


def test_refuses_other_formats_and_mismatched_inputs(device):
    raw = reference.random_weight_bytes("Q8_0", 32, 256, seed=5)
    q8 = PackedWeight.from_gguf(raw, "Q8_0", (32, 256), device=device)
    with pytest.raises(UnsupportedTensor, match="Q4_K, Q6_K"):
        quant_mma.quant_mma(torch.randn(2, 256, device=device), q8)
    w, x, _ = _case("Q4_K", 1, 64, 256, device)
    with pytest.raises(UnsupportedTensor, match="inputs"):
        quant_mma.quant_mma(torch.randn(2, 512, device=device), w)
    with pytest.raises(UnsupportedTensor, match="1, 2 or 4"):
        quant_mma.quant_mma(x.to(device), w, MmaConfig(step=3))
    with pytest.raises(UnsupportedTensor, match="not of this input"):
        other = quantize_activation(torch.randn(3, 256, device=device))
        quant_mma.quant_mma(x.to(device), w, quantized=other)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [16, 64])
@pytest.mark.parametrize(
    ("fmt", "shape"), [("Q4_K", (4096, 4096)), ("Q4_K", (1024, 4096)), ("Q6_K", (4096, 14336))]
)
def test_llama3_8b_shapes_on_the_gpu(fmt, shape, rows):
    """The default launch (wgmma, split-K on attn_q/o and attn_k/v) against the integer GEMV
    on the same 8-bit x, f16 in and out; twice, for the same bits."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    raw = reference.random_weight_bytes(fmt, *shape, seed=7)
    w = PackedWeight.from_gguf(raw, fmt, shape, device="cuda")
    x16 = torch.randn(rows, shape[1], device="cuda").half()
    xq = quantize_activation(x16)
    y = quant_mma.quant_mma(x16, w, quantized=xq, out_dtype=torch.float32)
    by_gemv = gemv.quant_matmul(x16, w, gemv.default_config(fmt, 1), quantized=xq).float()
    scale = float(by_gemv.abs().max())
    torch.testing.assert_close(y, by_gemv, rtol=0, atol=1e-3 * scale)  # the GEMV's f16 output
    again = quant_mma.quant_mma(x16, w, quantized=xq, out_dtype=torch.float32)
    torch.testing.assert_close(again, y, rtol=0, atol=0)
