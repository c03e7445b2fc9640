"""The dense quantized GEMM (kernels/packed_gemm.py) against kernels.reference.gemv (gguf's
dequantizer, float64) of x rounded to f16: every format it reads, rows across several blocks
of BLOCK_M, weight rows not a whole tile, K not a whole step, x's dtype kept, the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.errors import UnsupportedTensor
from kernels.packed_gemm import FORMATS, GemmConfig, default_config, quant_gemm
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

# x and the weights in f16 before the tensor cores' products: about 1e-3 of a dot product
TOLERANCE = 4e-3
SMALL = GemmConfig(block_m=16, block_n=32, ng=4)
N_OUT = 40  # one whole tile of 32 weight rows and a part of one
N_IN = {"Q4_K": 512, "Q5_K": 256, "Q6_K": 512}  # super-blocks of 256; the rest: 11 blocks of 32


def _case(fmt: str, rows: int, device: str, seed: int = 0):
    n_in = N_IN.get(fmt, 352)
    raw = reference.random_weight_bytes(fmt, N_OUT, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, fmt, (N_OUT, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed + 1))
    return w, x, raw


def _expected(x: torch.Tensor, raw, w) -> np.ndarray:
    x16 = x.to(torch.float16).double().reshape(-1, w.n_in).numpy()
    return reference.gemv(x16, raw, w.fmt.name, (w.n_out, w.n_in))


@pytest.mark.parametrize("fmt", FORMATS)
def test_matches_gguf_dequantizer(fmt, device):
    """37 rows: two whole blocks of 16 and a part of one; 4 groups a K step (Q8_0 and the
    other 32-weight formats: 11 groups, the last step masked)."""
    w, x, raw = _case(fmt, 37, device)
    y = quant_gemm(x.to(device), w, SMALL)
    assert y.dtype == torch.float32 and y.shape == (37, N_OUT)
    assert relative_error(y.cpu(), _expected(x, raw, w)) < TOLERANCE


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_output_in_x_dtype_with_leading_dims(dtype, device):
    """x [2, 9, K] in f16 / bf16 -> [2, 9, N] in the same dtype (the default config: one
    block of 32 rows, 64 weight rows of which 40 are real)."""
    w, x, raw = _case("Q4_K", 18, device, seed=3)
    x = x.to(dtype)
    y = quant_gemm(x.reshape(2, 9, -1).to(device), w)
    assert y.dtype == dtype and y.shape == (2, 9, N_OUT)
    tolerance = TOLERANCE if dtype == torch.float16 else 1.5e-2  # bf16's own rounding of y
    assert relative_error(y.float().cpu().reshape(18, -1), _expected(x, raw, w)) < tolerance


def test_rows_of_a_block_do_not_depend_on_the_others(device):
    """A row's result is the same bits alone in its block as beside 36 others (rows are
    independent in tl.dot; the masked rows load zeros)."""
    w, x, _ = _case("Q6_K", 37, device, seed=5)
    together = quant_gemm(x.to(device), w, SMALL).cpu()
    alone = quant_gemm(x[33:34].to(device), w, SMALL).cpu()
    assert torch.equal(together[33:34], alone)


@pytest.mark.parametrize("fmt", ["Q8_0", "Q6_K"])
def test_split_k_parts_sum_to_the_product(fmt, device):
    """K in 3 parts (Q8_0: 11 groups, parts of 4, 4 and 3; Q6_K: 16 groups, parts of 8 and 8,
    the third empty and not launched), f16 x: the float32 partial sums meet in x's dtype."""
    w, x, raw = _case(fmt, 20, device, seed=7)
    y = quant_gemm(x.half().to(device), w, GemmConfig(block_m=16, block_n=32, ng=4, split_k=3))
    assert y.dtype == torch.float16
    assert relative_error(y.float().cpu(), _expected(x, raw, w)) < TOLERANCE


def test_default_config_splits_k_where_tiles_are_few():
    """A decode step of 64 rows: 4096 rows of W are 64 tiles, K split in 5 (about 2 programs
    a multiprocessor of 132); 14336 rows are 224 tiles, no split; a K of 512 keeps 16 groups
    a part at least."""
    assert default_config(64, 4096, 4096).split_k == 5
    assert default_config(64, 1024, 4096).split_k == 8  # 128 groups: at most 8 parts of 16
    assert default_config(64, 14336, 4096).split_k == 1
    assert default_config(512, 4096, 4096).split_k == 1  # 4 blocks of 128 rows: 256 tiles
    assert default_config(64, 64, 512).split_k == 1


def test_default_config_blocks_of_rows():
    assert [default_config(n).block_m for n in (16, 17, 33, 64, 128, 255, 512)] == [
        16, 32, 64, 64, 64, 64, 128,
    ]  # fmt: skip


def test_unsupported_weight_and_shape_are_refused(device):
    raw = reference.random_weight_bytes("F16", 4, 64, seed=1)
    w = PackedWeight.from_gguf(raw, "F16", (4, 64), device=device)
    with pytest.raises(UnsupportedTensor, match="quant_matmul"):
        quant_gemm(torch.randn(20, 64).to(device), w)
    w, _, _ = _case("Q8_0", 1, device)
    with pytest.raises(UnsupportedTensor, match="352 inputs"):
        quant_gemm(torch.randn(20, 64).to(device), w)
