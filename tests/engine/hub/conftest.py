"""Fixtures for the Hub tests: a fake Hub on 127.0.0.1 with HF_ENDPOINT pointing at it."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.hub.fake_hub import FakeHub


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    hub = FakeHub()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        yield hub
    finally:
        hub.close()


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def library_files(models_dir: Path) -> dict[str, bytes]:
    """Every file a person would see in the models folder (not .part files, not the hidden
    quarantine folder or state files)."""
    if not models_dir.exists():
        return {}
    return {
        str(p.relative_to(models_dir)): p.read_bytes()
        for p in models_dir.rglob("*")
        if p.is_file()
        and not p.name.endswith(".part")
        and p.relative_to(models_dir) != Path("library.json")  # Hearth's index of the folder
        and not any(part.startswith(".") for part in p.relative_to(models_dir).parts)
    }


def assert_exact_or_nothing(models_dir: Path, expected: dict[str, bytes]) -> None:
    """The library holds each expected file exactly (sha256 equal) or not at all."""
    for name, data in library_files(models_dir).items():
        assert name in expected, f"unexpected file {name} in the library"
        assert sha256(data) == sha256(expected[name]), f"{name} is in the library but differs"
