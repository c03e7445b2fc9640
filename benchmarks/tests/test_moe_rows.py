"""benchmarks/kernels/moe.py on tiny cases through Triton's interpreter: its torch baseline
computes what the expert kernels compute (so the speed-up it prints compares like with like),
and a row has the benchmark schema."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (torch, triton) is not installed", allow_module_level=True)

import torch

import benchmarks.kernels.moe as moe
from kernels.moe_gemv import SILU, SWIGLU_OAI, expert_down, expert_gate_up
from kernels.moe_routing import route_experts

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(moe, "DEVICE", DEVICE)
    monkeypatch.setattr(moe, "ROUTINGS", 2)
    monkeypatch.setattr(moe, "L2_DEFEAT_BYTES", 1)


@pytest.mark.parametrize(
    "case",
    [
        moe.Case("qwen-like gate+up", "gate_up", "Q4_K", 8, 8, 256, 2),
        moe.Case("gpt-oss-like gate+up", "gate_up", "MXFP4", 8, 8, 64, 2, bias=True),
        moe.Case("qwen-like down", "down", "Q6_K", 8, 16, 256, 2),
    ],
)
def test_the_torch_baseline_computes_what_the_kernels_do(case, tiny):
    ws = moe._copies(case)[0]
    picked = np.array([[1, 5], [5, 2], [7, 1]])
    weights = torch.tensor([[0.7, 0.3], [0.5, 0.5], [0.2, 0.8]], device=DEVICE)
    routing = route_experts(torch.from_numpy(picked).to(DEVICE), weights, case.n_expert)
    rows = 6 if case.kind == "down" else 3
    x = torch.randn(rows, case.n_in, generator=torch.Generator().manual_seed(0)) * 0.05
    x = x.half().to(DEVICE)
    if case.kind == "down":
        ours = expert_down(x.reshape(3, 2, -1), ws[0], routing)
    else:
        act = SWIGLU_OAI if case.fmt == "MXFP4" else SILU
        ours = expert_gate_up(x, ws[0], ws[1], routing, act)
    theirs = moe.torch_way(case, ws, moe.pairs_by_expert(picked, DEVICE), weights, x)
    error = (ours.float() - theirs.float()).norm() / theirs.float().norm()
    assert error < 2e-2  # 8-bit x against f16 x, f16 outputs


def test_a_row_has_the_benchmark_schema(tiny, monkeypatch):
    timed = []

    def fake_time_calls(fn, repeats=20, graph=True):
        fn()
        timed.append(graph)
        return 1e-3

    monkeypatch.setattr(moe, "time_calls", fake_time_calls)
    case = moe.Case("tiny down", "down", "Q8_0", 8, 8, 64, 2)
    row = moe.measure(case, 3, copy_bw=1e12)
    assert {"format", "n_out", "n_in", "rows", "us", "gb_s", "of_copy"} <= set(row)
    seconds = 1e-3 / 2  # a timed call runs the 2 routings
    assert row["rows"] == 3 and row["format"] == "Q8_0" and row["us"] == pytest.approx(500.0)
    # 2 routings of 3 tokens x top-2 over 8 experts: 3..6 distinct experts each
    assert 3 <= row["experts_read"] <= 6
    expert_bytes = 8 * 64 // 32 * 34
    moved = row["experts_read"] * expert_bytes + 6 * 64 * 2 + 3 * 8 * 2
    assert row["gb_s"] == pytest.approx(moved / seconds / 1e9)
    assert timed == [True, True]  # ours and torch's, both as CUDA-graph replays


def test_the_sweep_names_each_cases_fastest_shape():
    """best_configs: per case and token count, the row of the fewest microseconds (what
    becomes the default)."""
    timed = (("a", 1, 3.0, 1), ("b", 1, 9.0, 2), ("a", 1, 2.0, 3), ("b", 1, 9.5, 4),
             ("a", 16, 5.0, 1), ("a", 16, 6.0, 3))  # fmt: skip
    rows = [{"case": case, "rows": t, "us": us, "config": config} for case, t, us, config in timed]
    best = moe.best_configs(rows)
    assert {key: row["config"] for key, row in best.items()} == {
        ("a", 1): 3,
        ("b", 1): 2,
        ("a", 16): 1,
    }
    assert len(moe.SWEEP) == len(set(moe.SWEEP))  # no shape timed twice


def test_the_shortlist_is_sweep_shapes_with_each_cases_default_first():
    from kernels.moe_gemv import MoeGemvConfig

    cases = {case.name: case for case in moe.CASES}
    for name, shapes in moe.SHORTLIST.items():
        configs = [MoeGemvConfig(*shape) for shape in shapes]
        assert set(configs) <= set(moe.SWEEP) and len(set(configs)) == len(configs), name
        assert configs[0] == moe._default(cases[name]), name
