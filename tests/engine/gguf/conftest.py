"""Fixtures for the GGUF reader tests: a local HTTP server (the real models: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engine.gguf.range_server import RangeServer


@pytest.fixture
def range_server() -> Iterator[RangeServer]:
    server = RangeServer()
    try:
        yield server
    finally:
        server.close()
