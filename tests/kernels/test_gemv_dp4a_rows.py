"""The integer GEMV with every input row in one program (kernels/gemv_dp4a_rows.py) against
numpy: x' @ W.T in float64, x' = reference.quantize_activation(x) (what it computes), and
against the program-per-row kernel it replaces at 2..4 rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from kernels import gemv, gemv_dp4a_rows, reference
from kernels.gemv_dp4a_rows import RowsConfig
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

EXACT = 5e-4  # test_gemv_dp4a's bound against x' @ W.T


def _case(fmt, n_out, n_in, rows, device, seed=0):
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed + 1))
    dequantized = reference.dequantize_weight(raw, fmt, (n_out, n_in)).astype(np.float64)
    return w, x, reference.quantize_activation(x.numpy()) @ dequantized.T


def _rows_call(w, x, cfg, device):
    out = torch.empty(x.shape[0], w.n_out, dtype=x.dtype, device=device)
    counters = gemv._COUNTERS.get(out.device, -(-w.n_out // cfg.block_n))
    gemv_dp4a_rows.launch(w, x.to(device), None, out, counters, cfg, device == "cuda")
    return out.cpu(), counters


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_matches_the_reference(fmt, device):
    """3 rows (ROWS 4: the last row skipped), 6 weight rows (a ragged tile of 8), K in 2 steps
    of one super-block (split-K, summed by the last program of each tile)."""
    w, x, exact = _case(fmt, 6, 512, 3, device)
    y, counters = _rows_call(w, x, RowsConfig(blocks_per_step=1), device)
    assert relative_error(y, exact) < EXACT
    assert int(counters.abs().sum()) == 0  # the last program of each tile reset its ticket


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("rows", [2, 3, 4])
def test_llama_8b_shapes_match_the_program_per_row_kernel(fmt, rows, device):
    """Llama-3-8B's attn_q (one step) and ffn_down (split-K), where the engine takes it at
    each ROWS (takes_shape): the same products as a program per row, within the float32 sums'
    order."""
    shapes = [s for s in ((4096, 4096), (4096, 14336)) if gemv_dp4a_rows.takes_shape(fmt, *s)]
    assert shapes
    for n_out, n_in in shapes:
        raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=rows)
        w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
        x = torch.randn(rows, n_in, device=device, dtype=torch.float16)
        config = gemv.default_config(fmt, 1)
        new = gemv.quant_matmul(x, w, config).float()
        old = gemv.quant_matmul(x, w, dataclasses.replace(config, rows_in_program=False))
        assert relative_error(new.cpu(), old.float().cpu()) < 2e-3


@pytest.mark.parametrize(
    ("fmt", "n_out", "n_in", "taken"),
    [
        ("Q4_K", 4096, 4096, True),  # attn_q/o: won at 2 and 4 rows
        ("Q4_K", 14336, 4096, True),  # ffn_gate/up
        ("Q4_K", 4096, 14336, True),  # ffn_down: rows past one step
        ("Q4_K", 1024, 4096, False),  # attn_k/v: lost at 4 rows
        ("Q6_K", 4096, 14336, True),  # ffn_down
        ("Q6_K", 4096, 4096, True),  # won at 2 and 4 rows on one warp
        ("Q6_K", 14336, 4096, True),
        ("Q6_K", 1024, 4096, False),  # attn_k/v: lost at 2 and 4 rows
    ],
)
def test_it_takes_the_shapes_it_won(fmt, n_out, n_in, taken):
    assert gemv_dp4a_rows.takes_shape(fmt, n_out, n_in) is taken


def test_quant_matmul_takes_it_from_two_rows_of_the_shapes_it_won(device, monkeypatch):
    """default_config's integer path sends 2..MAX_ROWS (4) rows here for a shape takes_shape
    names (one row, 5 rows, rows_alike and another shape keep a program a row), with the
    per-row kernel's products."""
    monkeypatch.setattr(gemv_dp4a_rows, "WIDE_FROM", 8)  # the 8-row test matrix counts as wide
    w, x, exact = _case("Q4_K", 8, 512, 3, device)
    launches = []
    rows_launch = gemv_dp4a_rows.launch
    monkeypatch.setattr(gemv_dp4a_rows, "launch", lambda *a: launches.append(a) or rows_launch(*a))
    config = gemv.default_config("Q4_K", 3)
    y = gemv.quant_matmul(x.to(device), w, config).cpu()
    assert len(launches) == 1
    gemv.quant_matmul(x[:1].to(device), w, config)
    gemv.quant_matmul(torch.randn(gemv_dp4a_rows.MAX_ROWS + 1, 512).to(device), w, config)
    gemv.quant_matmul(x.to(device), w, dataclasses.replace(config, rows_alike=True))
    per_row = gemv.quant_matmul(x.to(device), w, dataclasses.replace(config, rows_in_program=False))
    narrow, _, _ = _case("Q6_K", 4, 512, 3, device)  # one step, under WIDE_FROM: a program a row
    gemv.quant_matmul(x.to(device), narrow, gemv.default_config("Q6_K", 3))
    assert len(launches) == 1
    assert relative_error(y, exact) < EXACT
    assert relative_error(y, per_row.cpu()) < EXACT
