"""GemvConfig.rows_alike: row t of a many-row GEMV equals the one-row GEMV of x[t] bit for bit
(speculative checks, engine/hearth/verify.py), on both paths and with split-K."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernels import reference
from kernels.errors import UnsupportedTensor
from kernels.gemv import GemvConfig, default_config, quant_matmul
from kernels.packed_weight import PackedWeight


def _weight(fmt, n_out, n_in, device):
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=3)
    return PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)


# Q8_0: the float path, split-K on the interpreter's 4 SMs at 2048 inputs; Q4_K: the integer
# path in one step; Q6_K's long rows: its K loop, cut by split_plan (8 s in the interpreter on
# the CI machine: on a GPU only)
@pytest.mark.parametrize(
    ("fmt", "n_out", "n_in"),
    [("Q8_0", 24, 2048), ("Q4_K", 8, 512), pytest.param("Q6_K", 4, 4352, marks=pytest.mark.gpu)],
)
def test_each_row_equals_its_one_row_call(fmt, n_out, n_in, device):
    w = _weight(fmt, n_out, n_in, device)
    x = torch.randn(3, n_in, generator=torch.Generator().manual_seed(4)).to(device)
    one_row = default_config(fmt, 1)
    rows = quant_matmul(x, w, dataclasses.replace(one_row, rows_alike=True))
    for t in range(3):
        assert torch.equal(rows[t : t + 1], quant_matmul(x[t : t + 1], w, one_row))


def test_rows_alike_needs_one_row_a_program(device):
    w = _weight("Q8_0", 8, 256, device)
    config = GemvConfig(block_n=64, blocks_per_tile=4, block_b=16, rows_alike=True)
    with pytest.raises(UnsupportedTensor, match="block_b == 1"):
        quant_matmul(torch.ones(2, 256, device=device), w, config)
