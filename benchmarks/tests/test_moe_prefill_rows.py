"""benchmarks/kernels/moe_prefill.py on tiny cases through Triton's interpreter: the grouped
GEMM and the sliced expert GEMV it is timed against compute the same feed-forward (the
max_diff it prints is small), and every row has its schema."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (torch, triton) is not installed", allow_module_level=True)

import torch

import benchmarks.kernels.moe_prefill as bench
from kernels.moe_grouped_gemm import GroupedConfig

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_rows_compare_like_with_like(monkeypatch):
    """A gpt-oss-like case (MXFP4, biases, the clamped SwiGLU) of 5 tokens, the GEMV in slices
    of 2 tokens; the timed calls are not run (the interpreter is slow: the outputs compared
    are computed once, outside them)."""
    case = bench.Case("gpt-oss-like", "MXFP4", "MXFP4", 4, 32, 64, 2, "topk_softmax", oai=True)
    monkeypatch.setattr(bench, "DEVICE", DEVICE)
    monkeypatch.setattr(bench, "MAX_PAIRS", 4)
    timed = []

    def fake_time_calls(fn, repeats=20, graph=True):
        timed.append(fn)
        return 1e-3

    monkeypatch.setattr(bench, "time_calls", fake_time_calls)
    sweep = [GroupedConfig(block_m=16, block_n=32, ng=2)]
    rows = bench.measure(case, 5, sweep)
    paths = [r["path"] for r in rows]
    assert paths[:5] == ["sliced GEMV", "grouped GEMM", "  align", "  gate+up", "  down"]
    assert len(rows) == 7 and len(timed) == 7
    grouped = rows[1]
    assert grouped["max_diff"] < 3e-2  # the GEMV's 8-bit x against f16 x
    assert grouped["tflop_s"] == pytest.approx(2 * 10 * 3 * case.n_ff * case.n_embd / 1e-3 / 1e12)
    for r in rows:
        assert {"case", "tokens", "path", "us", "tflop_s", "gb_s"} <= r.keys()
