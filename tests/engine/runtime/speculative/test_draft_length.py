import pytest

from engine.runtime.speculative.draft_length import DraftLength, best_length, expected_tokens


def test_expected_tokens_of_a_step():
    assert expected_tokens(0.0, 5) == 1.0  # only the model's own token
    assert expected_tokens(1.0, 5) == 6.0  # every draft and one more
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_cheap_checking_drafts_long_and_dear_checking_drafts_nothing():
    assert best_length(0.8, 0.02, 16)[0] >= 8  # a GPU: checking is nearly free
    assert best_length(0.8, 1.0, 16)[0] == 0  # checking costs as much as decoding
    k, gain = best_length(0.95, 0.3, 16)
    assert 1 <= k <= 16 and gain > 1.5


def test_kept_drafts_raise_the_length_and_misses_lower_it():
    length = DraftLength(max_length=16, cost=0.1)
    start = length.next_length()
    for _ in range(8):
        length.record(8, 8)
    raised = length.next_length()
    assert raised > start
    for _ in range(8):
        length.record(8, 1)  # one kept, then a miss: an acceptance of one half
    assert length.next_length() < raised


def test_steps_that_keep_nothing_pause_drafting_longer_each_time():
    length = DraftLength(max_length=8, cost=0.1, max_pause=8)
    pauses = []
    for _ in range(4):
        length.record(4, 0)
        steps = 0
        while length.next_length() == 0:
            steps += 1
        pauses.append(steps)
    assert pauses == [0, 1, 3, 7]  # pauses of 1, 2, 4, 8 steps, each ending with a probe


def _drain_pause(length: DraftLength) -> int:
    """Steps until the pause ends; returns the length then drafted (the probe's: 1)."""
    while (k := length.next_length()) == 0:
        pass
    return k


def test_drafting_that_pays_again_ends_the_doubling():
    length = DraftLength(max_length=8, cost=0.1)
    length.record(4, 0)
    length.record(4, 0)  # pauses of 1, then 2 steps
    assert _drain_pause(length) == 1
    for _ in range(8):
        length.record(4, 4)  # kept: drafting pays again
    assert length.next_length() > 0
    length.record(4, 0)
    assert length.next_length() == 1  # a pause of one step again, ended by its probe


def test_a_kept_probe_where_drafting_does_not_pay_keeps_doubling():
    """Checking one draft costs 2 plain steps: a kept probe (2 tokens at best) does not pay,
    so the pauses keep growing instead of probing every other step."""
    length = DraftLength(max_length=1, cost=1.0, max_pause=64)
    length.record_cost(1, seconds=0.02, plain_seconds=0.01)
    pauses = []
    for _ in range(5):
        steps = 0
        while length.next_length() == 0:
            steps += 1
        pauses.append(steps)
        length.record(1, 1)  # the probe is kept
    assert pauses == [1, 2, 4, 8, 16]  # each pause ended by a kept probe


def test_a_dear_probe_waits_longer():
    """A probe that costs 4 plain steps (a GPU's graph built again around it) may add at most
    3% to the steps paused: pauses grow past max_pause, to 134 steps."""
    length = DraftLength(max_length=4, max_pause=32)
    length.record_cost(1, seconds=0.05, plain_seconds=0.01)
    for _ in range(10):
        length.record(1, 0)
    assert length._pause == 134  # ceil((5 - 1) / 0.03)


def test_measured_cost_moves_the_estimate():
    length = DraftLength(cost=0.3)
    for _ in range(30):
        length.record_cost(4, seconds=0.05, plain_seconds=0.01)  # (5 - 1) / 4 per draft
    assert length.cost == pytest.approx(1.0, abs=0.01)


def test_a_measured_length_is_priced_at_its_own_cost():
    """A GPU switches kernels above 8 rows: 16 drafts cost far more than the line says."""
    line_only, _ = best_length(0.95, 0.02, 16)
    assert line_only == 16
    k, _ = best_length(0.95, 0.02, 16, measured={16: 2.5})
    assert k == 15  # the next longest, priced on the line


def test_recorded_costs_steer_the_length():
    length = DraftLength(max_length=16, cost=0.02)
    for _ in range(8):
        length.record(16, 16)  # every draft kept: acceptance near 1
    assert length.next_length() == 16
    length.record_cost(8, seconds=0.015, plain_seconds=0.01)  # 8 drafts: 1.5 plain steps
    for _ in range(10):
        length.record_cost(16, seconds=0.05, plain_seconds=0.01)  # 16 drafts: 5 plain steps
    assert length.next_length() < 16


def test_lengths_not_tried_are_priced_from_the_cheapest_cost_a_draft():
    """Short probes cost the most a draft (one draft: 2 plain steps on this CPU, 15: 11): their
    price must not keep long drafts from being tried."""
    length = DraftLength(max_length=16)
    length.record_cost(15, seconds=0.11, plain_seconds=0.01)
    for _ in range(20):
        length.record_cost(1, seconds=0.02, plain_seconds=0.01)
    assert length.cost == pytest.approx(10 / 15)


def test_a_new_reply_does_not_sit_out_the_last_one_s_pause():
    """A free-chat reply's misses doubled the pause; the next reply, which may copy its
    prompt, must not sit that pause out (it could end before drafting at all)."""
    length = DraftLength(max_length=8, cost=0.5, max_pause=32)
    for _ in range(6):
        length.record(4, 0)  # pauses of 1, 2, 4, 8, 16, 32 steps
    assert [length.next_length() for _ in range(3)] == [0, 0, 0]
    length.new_reply()
    assert [length.next_length() for _ in range(2)] == [0, 1]  # a pause of one, then a probe
