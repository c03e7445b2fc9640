"""benchmarks/kernels/batch_rows.py on a tiny shape through Triton's interpreter: its three paths
(the float GEMV, the integer GEMV, dequantize + torch's GEMM) compute the same product (the
max_diff it prints is small), every row has its schema, and the verdicts read the thresholds off
the rows."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (torch, triton) is not installed", allow_module_level=True)

import torch

if not torch.cuda.is_available():  # before triton's first import: its interpreter on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

import benchmarks.kernels.batch_rows as bench
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_rows_compare_like_with_like(monkeypatch):
    """A Q4_K 48x256 matrix at 1 and 20 rows; the timed calls are not run (the interpreter is
    slow: the outputs compared are computed once, outside them)."""
    monkeypatch.setattr(bench, "DEVICE", DEVICE)
    raw = random_weight_bytes("Q4_K", 48, 256, seed=2)
    w = PackedWeight.from_gguf(raw, "Q4_K", (48, 256), device=DEVICE)
    monkeypatch.setattr(bench, "_weights", lambda fmt, n_out, n_in: [w])
    timed = []

    def fake_time_calls(fn, repeats=20, graph=True):
        timed.append(fn)
        return 1e-3

    monkeypatch.setattr(bench, "time_calls", fake_time_calls)
    rows = bench.measure("tiny", "Q4_K", 48, 256, [1, 20])
    assert [(r["rows"], r["path"]) for r in rows] == [
        (m, path) for m in (1, 20) for path in (bench.FLOAT, bench.INTEGER, bench.DEQUANT)
    ]
    assert len(timed) == 6
    for r in rows:
        assert {"shape", "fmt", "rows", "path", "us", "gb_s", "tflop_s", "max_diff"} <= r.keys()
        # f16 x and weights against the f16 GEMM; the integer GEMV's x in 8 bits
        assert r["max_diff"] < (2e-2 if r["path"] == bench.INTEGER else 4e-3), r
    assert rows[3]["tflop_s"] == pytest.approx(2 * 20 * 48 * 256 / 1e-3 / 1e12)
    assert rows[3]["gb_s"] == pytest.approx(w.nbytes / 1e-3 / 1e9)


def test_the_verdicts_take_the_run_of_wins_from_the_smallest_row_count(capsys):
    """The integer GEMV wins at 1, 2 and 8 rows on both shapes, loses at 4 on one (so 2), and
    wins again at 16: DP4A_MAX_ROWS is 2; the float GEMV wins at 1 row only."""
    us = {  # (rows) -> (float, integer, dequant) microseconds on shape "a"; "b" as "a" but 4
        1: (5, 4, 10), 2: (20, 6, 10), 4: (20, 8, 10), 8: (20, 9, 10), 16: (20, 9, 10),
    }  # fmt: skip
    rows = []
    for shape in ("a", "b"):
        for m, times in us.items():
            for path, t in zip((bench.FLOAT, bench.INTEGER, bench.DEQUANT), times, strict=True):
                if shape == "b" and m == 4 and path == bench.INTEGER:
                    t = 11
                rows.append({"shape": shape, "rows": m, "path": path, "us": t})
    assert bench.verdicts(rows) == {"DP4A_MAX_ROWS": 2, bench.FLOAT: 1}
    out = capsys.readouterr().out
    assert "integer GEMV: beats dequant + torch on every shape up to M = 2 " in out
    assert "b                        M=4    float GEMV:  2.00   integer GEMV:  1.10" in out
