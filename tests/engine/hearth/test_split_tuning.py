"""engine/hearth/split_tuning.py: the shares of a split tried around the planned one, the
slots they need, and the choice of the fastest by the medians of rounds taken in turn."""

from __future__ import annotations

import pytest

from engine.hearth.split_tuning import (
    SplitSetting,
    cpu_picks_to_try,
    settings_to_try,
    staging_slots,
    tune,
)


@pytest.mark.parametrize(
    ("k", "c", "tried", "slots"),
    [
        (8, 3, [2, 3, 4], 6),
        (8, 1, [1, 2], 7),
        (8, 7, [6, 7], 2),
        (4, 2, [1, 2, 3], 3),
        (2, 1, [1], 1),
    ],
)
def test_the_shares_tried_and_the_slots_they_need(k, c, tried, slots):
    assert cpu_picks_to_try(k, c) == tried
    assert staging_slots(k, c) == slots
    assert settings_to_try(k, c) == [SplitSetting(n, e) for n in tried for e in (0, 1)]


@pytest.mark.parametrize("c", [0, 8, -1])
def test_a_share_that_is_no_split_is_refused(c):
    with pytest.raises(ValueError, match="not a split"):
        cpu_picks_to_try(8, c)


def _timer(times: dict, calls: list):
    """step_seconds from a table: each setting's next time, one per call."""

    def step_seconds(setting):
        calls.append(setting)
        return times[setting][sum(1 for c in calls if c == setting) - 1]

    return step_seconds


def test_tune_takes_the_settings_in_turn_and_chooses_the_fastest_median():
    """One slow round (another process, a page fault) does not decide: the medians do. The
    fastest is inside the shares tried, so no other is tried."""
    settings = settings_to_try(8, 3)
    times = {s: [0.010] * 5 for s in settings}
    times[SplitSetting(3, 1)] = [0.020, 0.0090, 0.0091, 0.0092, 0.030]  # fastest median
    times[SplitSetting(2, 0)] = [0.001, 0.011, 0.011, 0.011, 0.011]  # fastest once
    calls = []
    tuning = tune(SplitSetting(3), 8, 6, _timer(times, calls))
    assert calls == settings * 5
    assert tuning.chosen == SplitSetting(3, 1)
    assert tuning.median_ms(SplitSetting(3, 1)) == pytest.approx(9.2)
    assert "3 by the CPU, the first copy by the stepping thread (planned 3)" in tuning.text()
    assert "3e 9.20" in tuning.text()


def test_tune_goes_further_while_the_fastest_is_the_furthest_share_tried():
    """Steps faster with every pick ggml takes up to 6 of 8: the shares 5 and 6 are tried
    after 2-4, each batch beside the fastest so far (timed again), and 7 once 6 is the
    fastest; 6 is kept. Fewer than 2 would need more slots than the 6 there are."""
    per_share = {2: 0.012, 3: 0.011, 4: 0.010, 5: 0.009, 6: 0.008, 7: 0.0085}
    times = {SplitSetting(n, e): [per_share[n] - e * 1e-4] * 15 for n in per_share for e in (0, 1)}
    calls = []
    tuning = tune(SplitSetting(3), 8, 6, _timer(times, calls))
    assert tuning.chosen == SplitSetting(6, 1)
    batches = [settings_to_try(8, 3)]
    batches.append([SplitSetting(4, 1), SplitSetting(5, 0), SplitSetting(5, 1)])
    batches.append([SplitSetting(5, 1), SplitSetting(6, 0), SplitSetting(6, 1)])
    batches.append([SplitSetting(6, 1), SplitSetting(7, 0), SplitSetting(7, 1)])
    assert calls == [s for batch in batches for s in batch * 5]
    assert len(tuning.seconds[SplitSetting(5, 1)]) == 10
    assert SplitSetting(1) not in tuning.seconds


def test_tune_tries_fewer_picks_on_the_cpu_only_as_the_slots_allow():
    """The fastest at the fewest picks tried (2) goes on to 1 where the slots hold 7."""
    per_share = {1: 0.008, 2: 0.009, 3: 0.010, 4: 0.011}
    times = {SplitSetting(n, e): [per_share[n]] * 10 for n in per_share for e in (0, 1)}
    assert tune(SplitSetting(3), 8, 7, _timer(times, [])).chosen == SplitSetting(1)
    assert tune(SplitSetting(3), 8, 6, _timer(times, [])).chosen == SplitSetting(2)


def test_tune_keeps_the_planned_setting_where_it_ties():
    tuning = tune(SplitSetting(3), 8, 6, lambda s: 0.010)
    assert tuning.chosen == SplitSetting(3)
    with pytest.raises(ValueError, match="does not fit 4 slots"):
        tune(SplitSetting(3), 8, 4, lambda s: 0.010)
