"""Fixtures for the Hearth engine's tests: torch or skip, and the CPU as its device."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")


@pytest.fixture
def on_cpu(monkeypatch):
    """Run the Hearth engine on the CPU (there is no GPU here)."""
    monkeypatch.setenv("HEARTH_ENGINE_DEVICE", "cpu")
