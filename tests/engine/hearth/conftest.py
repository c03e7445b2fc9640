"""Fixtures for the Hearth engine's tests: torch or skip, and the CPU as its device."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")


@pytest.fixture
def on_cpu(monkeypatch):
    """Run the Hearth engine on the CPU (there is no GPU here)."""
    monkeypatch.setenv("HEARTH_ENGINE_DEVICE", "cpu")


@pytest.fixture(autouse=True, scope="package")
def q8_0_on_the_float_gemv():
    """The tiny models' matrices are mostly Q8_0 (tiny_models.py), and these tests compare two
    paths (graph and eager, paged and plain caches, experts here and there) or a path and the
    float64 reference within float tolerances. A Q8_0 matrix at one input row takes the integer
    GEMV by default (x in 8 bits), where a difference far below those tolerances can flip a
    rounding of x and move a tiny model's logits by a few percent: so Q8_0 keeps the float path
    here. The integer GEMV has its own tests against the reference within 8-bit x's error
    (test_kernels_ops.py, tests/kernels/test_gemv_q8_0.py). Package-scoped, so that the
    module-scoped runs of a model (set up before any function's fixtures) take it too."""
    try:
        import kernels.gemv
    except ImportError:  # no Triton: the kernels are not in this run
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels.gemv, "Q8_0_INTEGER_MAX_ROWS", 0)
        yield
