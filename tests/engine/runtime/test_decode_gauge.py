"""Which bandwidth the worker's gauge divides by, by where the weights are (a table)."""

from __future__ import annotations

import pytest

from engine.runtime import decode_gauge
from engine.runtime.decode_gauge import MEASURED, PUBLISHED, DecodeGauge, bandwidth_where_it_runs


@pytest.fixture
def measured(monkeypatch):
    asked = []

    def fake(device: str) -> float:
        asked.append(device)
        return {"cuda": 3000.0, "cpu": 40.0}[device]

    monkeypatch.setattr(decode_gauge, "measure_copy_rate", fake)
    return asked


RTX = "CUDA0: NVIDIA GeForce RTX 4090"


@pytest.mark.parametrize(
    ("engine", "description", "runs_on", "layers", "expected", "asked"),
    [
        ("hearth", "llama 8B Q4_K_M (Hearth engine, cuda)", ("CPU",), 32, (3000.0, MEASURED),
         ["cuda"]),
        ("hearth", "llama 8B Q4_K_M (Hearth engine, cpu)", ("CPU",), 32, (40.0, MEASURED),
         ["cpu"]),
        ("llama", "llama 8B", (RTX,), 32, (1008.0, PUBLISHED), []),  # all layers on one GPU
        ("llama", "llama 8B", (RTX, "CPU"), 32, (0.0, ""), []),  # split with the CPU
        ("llama", "llama 8B", (RTX, "CUDA1: NVIDIA GeForce RTX 4090"), 32, (0.0, ""), []),
        ("llama", "llama 8B", (RTX,), 20, (0.0, ""), []),  # some layers on the CPU
        ("llama", "llama 8B", ("CUDA0: Some Unknown Card",), 32, (0.0, ""), []),
        ("llama", "llama 8B", ("CPU",), 0, (40.0, MEASURED), ["cpu"]),
    ],
)  # fmt: skip
def test_the_bandwidth_is_where_the_weights_are(
    measured, engine, description, runs_on, layers, expected, asked
):
    assert bandwidth_where_it_runs(engine, description, runs_on, layers, 32) == expected
    assert measured == asked


def test_the_starter_models_gauge_bounds_each_reply(starter_model):
    gauge = DecodeGauge.of(str(starter_model), "f16", "f16", 20.0)
    assert gauge is not None
    short, long = gauge.bound(10, 11), gauge.bound(2000, 11)
    # ~100 MB of weights at 20 GB/s: a few hundred tokens a second, less over a longer context
    assert 50 < long < short < 1000


def test_no_bandwidth_or_no_header_gives_no_gauge(tmp_path):
    assert DecodeGauge.of(str(tmp_path / "missing.gguf"), "f16", "f16", 20.0) is None
    assert DecodeGauge.of(str(tmp_path / "missing.gguf"), "f16", "f16", 0.0) is None
