"""A reply's baseline from its own plain steps: exact at a steady speed, never above the truth
where the speed moves, robust to one slow step, and none where too few were timed."""

import pytest

from engine.runtime.speculative.reply_speed import MIN_PLAIN, ReplySpeed


def _checking(speed: ReplySpeed, n: int, seconds: float, tokens: int = 3) -> None:
    for _ in range(n):
        speed.step(seconds, tokens)


def _plain(speed: ReplySpeed, n: int, seconds: float) -> None:
    for _ in range(n):
        speed.step(seconds, 1, warm_plain=True)


def test_a_steady_machine_gives_its_plain_step():
    speed = ReplySpeed()
    _plain(speed, 2, 0.010)
    _checking(speed, 20, 0.020)
    _plain(speed, 1, 0.010)
    assert speed.plain_step_seconds() == pytest.approx(0.010)


def test_too_few_plain_steps_give_nothing():
    speed = ReplySpeed()
    _plain(speed, MIN_PLAIN - 1, 0.010)
    _checking(speed, 20, 0.020)
    speed.step(0.010, 1)  # a plain step that is not warm (after a checking step)
    assert speed.plain_step_seconds() == 0.0


def test_one_slow_plain_step_does_not_set_the_price():
    speed = ReplySpeed()
    _plain(speed, 2, 0.010)
    speed.step(0.080, 1, warm_plain=True)  # another program took the core for a moment
    _checking(speed, 20, 0.020)
    assert speed.plain_step_seconds() == pytest.approx(0.010)


def test_bursts_that_slow_every_step_now_and_then_are_in_the_price():
    """Another program takes the core now and then, in plain steps and checking steps alike:
    the median of plain steps alone would price a reply that gained nothing under 1x."""
    speed = ReplySpeed()
    for _ in range(5):
        for seconds in (0.010, 0.010, 0.010, 0.020):  # every fourth step doubled
            speed.step(seconds, 1, warm_plain=True)
    mean = (3 * 0.010 + 0.020) / 4
    assert 0.95 * mean <= speed.plain_step_seconds() <= mean


@pytest.mark.parametrize("first, then", [(0.020, 0.010), (0.010, 0.020)])
def test_where_the_speed_moved_each_stretch_is_priced_at_its_own_plain_steps(first, then):
    """Half the reply at one speed, half at another, plain steps timed between stretches of
    checking steps (as the loop times them every PLAIN_STEP_EVERY steps): each stretch is
    priced at the plain steps around it, the one across the turn at the cheaper side - never
    the start's price for the whole reply, and never above the truth."""
    speed = ReplySpeed()
    tokens = cost = 0.0
    for plain in (first, first, then, then):
        _plain(speed, 2, plain)
        _checking(speed, 5, 2 * plain)  # checking steps of 3 tokens
        tokens, cost = tokens + 17, cost + 17 * plain
    _plain(speed, 2, then)
    true = (cost + 2 * then) / (tokens + 2)
    assert true * 0.8 <= speed.plain_step_seconds() <= true
    start_only = ReplySpeed()
    _plain(start_only, 2, first)
    assert speed.plain_step_seconds() != pytest.approx(start_only.plain_step_seconds())
