"""One launch over a Q4_K and a Q6_K matrix that read the same x (kernels/gemv_mixed.py),
against x' @ [A; B].T in float64 (x' the 8-bit x: act_quant.reference_quantize)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.act_quant import quantize_activation, reference_quantize
from kernels.errors import UnsupportedTensor
from kernels.gemv_mixed import MixedWeight, mixed_matmul, supports
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

EXACT = 5e-4  # as test_gemv_dp4a: float32 sums against float64
TILES = [(4, True), (4, False), (2, True), (2, False)]  # B's rows a program, rows in the thread


@functools.lru_cache(maxsize=2)
def _case(n_a, n_b, n_in, device, seed):
    raw_a = reference.random_weight_bytes("Q4_K", n_a, n_in, seed=seed)
    raw_b = reference.random_weight_bytes("Q6_K", n_b, n_in, seed=seed + 1)
    a = PackedWeight.from_gguf(raw_a, "Q4_K", (n_a, n_in), device=device)
    b = PackedWeight.from_gguf(raw_b, "Q6_K", (n_b, n_in), device=device)
    dequantized = np.concatenate(
        [reference.dequantize_weight(raw_a, "Q4_K", (n_a, n_in)),
         reference.dequantize_weight(raw_b, "Q6_K", (n_b, n_in))]
    ).astype(np.float64)  # fmt: skip
    return MixedWeight(a, b), dequantized


def _exact(xq, dequantized):
    """x' @ [A; B].T for the x' that the kernel reads: quantize_activation's own codes and
    scales (on the GPU its rounding is an FMA, so a value on a rounding tie of numpy's two
    roundings, common for f16 inputs, may round the other way: reference_quantize would
    count that against the GEMV)."""
    q = xq.words.cpu().contiguous().view(torch.int8).to(torch.float64).reshape(1, -1, 32)
    x_used = (q * xq.scales.cpu().to(torch.float64)[:, :, None]).reshape(1, -1).numpy()
    return x_used @ dequantized.T


@pytest.mark.parametrize(("b_rows", "b_rit"), TILES)
@pytest.mark.parametrize(("n_a", "n_b", "n_in"), [(37, 10, 768), (32, 8, 1024), (20, 7, 4096)])
def test_matches_the_reference(n_a, n_b, n_in, b_rows, b_rit, device):
    """Ragged rows of both (37 and 10: Q6_K's last tile half empty at 4 rows a program), whole
    tiles (32 + 8 at 1024: the masks folded away only where the row is one whole step), a
    4096-wide row (16 super-blocks, one whole step: EVEN for A, not B's 7 rows)."""
    w, dequantized = _case(n_a, n_b, n_in, device, 0)
    x = torch.randn(1, n_in, generator=torch.Generator().manual_seed(2)).to(device)
    xq = quantize_activation(x)
    exact = _exact(xq, dequantized)
    # the codes are x's (a code rounded the other way on a tie costs about 3e-4 here)
    assert relative_error(exact, reference_quantize(x.cpu().numpy()) @ dequantized.T) < 5e-3
    y = mixed_matmul(x, w, b_rows=b_rows, b_rows_in_thread=b_rit).cpu()
    assert y.shape == (1, n_a + n_b)
    assert relative_error(y[:, :n_a], exact[:, :n_a]) < EXACT  # each part on its own too
    assert relative_error(y[:, n_a:], exact[:, n_a:]) < EXACT


def test_a_shared_quantized_input_gives_the_same_result(device):
    w, _dequantized = _case(37, 10, 768, device, 0)
    x = torch.randn(1, 768).to(device)
    alone = mixed_matmul(x, w)
    shared = mixed_matmul(x, w, quantized=quantize_activation(x))
    torch.testing.assert_close(shared, alone, rtol=0, atol=0)


def test_what_it_cannot_serve_is_refused(device):
    w, _dequantized = _case(37, 10, 768, device, 0)
    x = torch.randn(1, 768)
    assert supports(w.a, w.b) and not supports(w.b, w.a) and not supports(w.a, w.b, 2)
    with pytest.raises(UnsupportedTensor, match="Q4_K then Q6_K"):
        mixed_matmul(x.to(device), MixedWeight(w.b, w.a))
    with pytest.raises(UnsupportedTensor, match="one input row"):
        mixed_matmul(torch.randn(2, 768).to(device), w)
    raw = reference.random_weight_bytes("Q6_K", 8, 4608, seed=3)  # 18 super-blocks: a loop
    long_b = PackedWeight.from_gguf(raw, "Q6_K", (8, 4608), device=device)
    assert not supports(w.a, long_b)
    with pytest.raises(UnsupportedTensor, match="quantize the same x"):
        other = quantize_activation(torch.randn(1, 1024).to(device))
        mixed_matmul(x.to(device), w, quantized=other)


@pytest.mark.gpu
@pytest.mark.parametrize(("b_rows", "b_rit"), TILES)
def test_the_q4_k_m_attention_input_of_llama3_8b(b_rows, b_rit):
    """Q+K (5120x4096 Q4_K) and V (1024x4096 Q6_K), f16 in and out, as timed."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    w, dequantized = _case(5120, 1024, 4096, "cuda", 6)
    x = torch.randn(1, 4096, generator=torch.Generator().manual_seed(8)).half().cuda()
    xq = quantize_activation(x)
    exact = _exact(xq, dequantized)
    y = mixed_matmul(x, w, quantized=xq, b_rows=b_rows, b_rows_in_thread=b_rit)
    assert y.dtype == torch.float16
    assert relative_error(y[:, :5120].float().cpu(), exact[:, :5120]) < EXACT + 2e-3
    assert relative_error(y[:, 5120:].float().cpu(), exact[:, 5120:]) < EXACT + 2e-3
    again = mixed_matmul(x, w, quantized=xq, b_rows=b_rows, b_rows_in_thread=b_rit)
    torch.testing.assert_close(again, y, rtol=0, atol=0)
