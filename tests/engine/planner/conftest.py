"""Fixtures for the planner tests: model headers of real shapes, and llama.cpp's own figures."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.gguf import ModelInfo, read_model_info
from engine.planner import DeviceBudget, ModelProfile, PlanRequest, build_profile
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3
MIB = 1024**2
MEASUREMENTS = Path(__file__).parent / "fixtures" / "llama_cpu_measurements.json"


@pytest.fixture(scope="session")
def synthetic_info(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], ModelInfo]:
    """synthetic_info("llama3-8b", "Q4_K_M") -> the ModelInfo of a header-only file."""
    folder = tmp_path_factory.mktemp("synthetic")

    @functools.cache
    def make(shape: str, quant: str) -> ModelInfo:
        path = write_sparse_gguf(folder / f"{shape}-{quant}.gguf", SHAPES[shape], quant)
        return read_model_info(path)

    return make


@pytest.fixture(scope="session")
def synthetic_profile(synthetic_info) -> Callable[[str, str], ModelProfile]:
    @functools.cache
    def make(shape: str, quant: str) -> ModelProfile:
        return build_profile(synthetic_info(shape, quant))

    return make


@pytest.fixture(scope="session")
def measurements() -> dict[str, list[dict]]:
    return json.loads(MEASUREMENTS.read_text())


def gpu(gib: float, backend: str = "cuda", bandwidth: float | None = 500.0, name: str = "gpu0"):
    return DeviceBudget(name, f"{gib:g} GiB card", backend, int(gib * GIB), bandwidth)


def request(*gpus: DeviceBudget, **options) -> PlanRequest:
    options.setdefault("host_budget_bytes", 64 * GIB)
    return PlanRequest(gpus=tuple(gpus), **options)
