"""The trial behind SpeculativeParams "auto": its rule, its timing of a context, its memory."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.runtime.engine_api import StepOutput
from engine.runtime.speculative import trial
from engine.runtime.speculative.trial import TrialResult


@pytest.mark.parametrize(
    ("cost", "pays", "words"),
    [(1.2, True, "on: a check of 4 drafts costs 1.2 plain steps here"),
     (2.0, True, "on: a check of 4 drafts costs 2.0 plain steps here"),
     (2.1, False, "off: a check of 4 drafts costs 2.1 plain steps here, more than kept"),
     (float("inf"), False, "off: a check of 4 drafts costs inf plain steps")],
)  # fmt: skip
def test_on_where_a_check_costs_at_most_two_plain_steps(cost, pays, words):
    result = TrialResult(plain_step_seconds=0.01, check_cost=cost)
    assert result.pays is pays
    assert result.reason().startswith(words)


def test_a_check_at_two_steps_still_gains_where_copying_replies_keep_drafts():
    assert TrialResult(0.01, trial.ON_BELOW).gain_when_copying() > 1.1


class _TimedContext:
    """Plain steps cost 1 s and checks `check_seconds` on a fake clock."""

    def __init__(self, clock, check_seconds: float, rows_checked: int | None = None):
        self.clock, self.check_seconds, self.rows_checked = clock, check_seconds, rows_checked
        self.calls: list[str] = []

    def clear(self):
        self.calls.append("clear")

    def decode(self, tokens):
        self.calls.append(f"decode {len(tokens)}")
        return StepOutput()

    def step(self, token):
        self.clock.now += 1.0
        return StepOutput()

    def check(self, tokens, position):
        self.clock.now += self.check_seconds
        return [StepOutput()] * (self.rows_checked or len(tokens))

    def forget_from(self, position):
        self.calls.append(f"forget {position}")
        return True

    def synchronize(self):
        pass


@pytest.fixture
def clock(monkeypatch):
    fake = SimpleNamespace(now=0.0)
    monkeypatch.setattr(trial, "time", SimpleNamespace(perf_counter=lambda: fake.now))
    return fake


def test_measure_prices_a_check_in_plain_steps_and_leaves_the_context_clear(clock):
    ctx = _TimedContext(clock, check_seconds=1.5)
    result = trial.measure(ctx, [1, 2, 3])
    assert (result.plain_step_seconds, result.check_cost) == (1.0, 1.5)
    assert ctx.calls[:2] == ["clear", "decode 3"] and ctx.calls[-1] == "clear"
    # every check rolled back to the position after the plain steps
    assert ctx.calls.count(f"forget {3 + trial.PLAIN_STEPS + 1}") == trial.CHECKS + 1


def test_a_context_that_checks_fewer_rows_is_priced_as_dear(clock):
    result = trial.measure(_TimedContext(clock, check_seconds=1.0, rows_checked=2), [1, 2])
    assert not result.pays


def test_a_trial_is_remembered_per_key_and_a_broken_store_is_none(tmp_path):
    store = tmp_path / "trials.json"
    assert trial.remembered("k", store) is None
    trial.remember("k", TrialResult(0.02, 1.4), store)
    trial.remember("other", TrialResult(0.03, 3.0), store)
    assert trial.remembered("k", store) == TrialResult(0.02, 1.4)
    store.write_text("not json")
    assert trial.remembered("k", store) is None
    trial.remember("k", TrialResult(0.02, 1.4), store)  # a broken store is replaced
    assert trial.remembered("k", store) == TrialResult(0.02, 1.4)


def test_the_key_changes_with_the_file_engine_device_and_cache_types(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    key = trial.trial_key(str(model), "hearth", "cuda", "f16", "f16")
    assert key != trial.trial_key(str(model), "hearth", "cpu", "f16", "f16")
    assert key != trial.trial_key(str(model), "hearth", "cuda", "q8", "f16")
    model.write_bytes(b"xy")  # another file at the same path
    assert key != trial.trial_key(str(model), "hearth", "cuda", "f16", "f16")
