"""The benchmark scripts' own checks, run by hand (`pytest benchmarks/tests`), not by `make
test`: the test suite (tests/) never imports benchmarks/."""

from __future__ import annotations

from testkit.model_fixtures import starter_model  # noqa: F401
