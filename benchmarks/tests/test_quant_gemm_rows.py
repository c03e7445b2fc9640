"""benchmarks/kernels/quant_gemm.py on a tiny shape through Triton's interpreter: its three paths
(GEMV in slices of 16, dequantize + torch's GEMM, the quantized GEMM) and a sweep shape compute
the same product (the max_diff it prints is small), every row has its schema, and the verdicts
read the rows."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (torch, triton) is not installed", allow_module_level=True)

import torch

if not torch.cuda.is_available():  # before triton's first import: its interpreter on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

import benchmarks.kernels.quant_gemm as bench
from kernels.packed_gemm import GemmConfig
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_rows_compare_like_with_like(monkeypatch, capsys):
    """A Q4_K 48x256 matrix at 20 rows (two GEMV slices, one GEMM block of 32); the timed
    calls are not run (the interpreter is slow: the outputs compared are computed once,
    outside them)."""
    monkeypatch.setattr(bench, "DEVICE", DEVICE)
    raw = random_weight_bytes("Q4_K", 48, 256, seed=2)
    w = PackedWeight.from_gguf(raw, "Q4_K", (48, 256), device=DEVICE)
    monkeypatch.setattr(bench, "_weights", lambda fmt, n_out, n_in: [w])
    timed = []

    def fake_time_calls(fn, repeats=20, graph=True):
        timed.append(fn)
        return 1e-3

    monkeypatch.setattr(bench, "time_calls", fake_time_calls)
    sweep = [GemmConfig(block_m=16, block_n=32, ng=4), GemmConfig(block_m=64)]
    rows = bench.measure("tiny", "Q4_K", 48, 256, [20], sweep)
    # block_m 64 is past 20 rows' block: left out; the default (block_m 32) without a split
    assert [r["path"] for r in rows] == [
        bench.GEMV, bench.DEQUANT, bench.GEMM, "  sweep bm16 bn32 ng4 w4 k1",
        "  sweep bm32 bn64 ng2 w4 k1",
    ]  # fmt: skip
    assert len(timed) == 5
    for r in rows:
        assert {"shape", "fmt", "rows", "path", "us", "gb_s", "tflop_s", "max_diff"} <= r.keys()
        assert r["max_diff"] < 4e-3  # f16 x and weights against the f16 GEMM
    assert rows[2]["tflop_s"] == pytest.approx(2 * 20 * 48 * 256 / 1e-3 / 1e12)
    assert rows[2]["gb_s"] == pytest.approx(w.nbytes / 1e-3 / 1e9)
    bench._verdicts(rows)
    assert "best launch shape tiny" in capsys.readouterr().out
