import pytest

from engine.runtime.speculative.draft_length import (
    DraftLength,
    best_length,
    expected_tokens,
    fixed_shape_lengths,
)


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
    length = DraftLength(max_length=8, cost=0.1, max_pause=8, switch=0.0)
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
    length = DraftLength(max_length=8, cost=0.1, switch=0.0)
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
    so the pauses keep growing instead of probing every other step; the first is 4 steps, so
    that the probe (a step more than a plain one) adds a quarter to them at most."""
    length = DraftLength(max_length=1, cost=1.0, max_pause=64, switch=0.0)
    length.record_cost(1, seconds=0.02, plain_seconds=0.01)
    pauses = []
    for _ in range(5):
        steps = 0
        while length.next_length() == 0:
            steps += 1
        pauses.append(steps)
        length.record(1, 1)  # the probe is kept
    assert pauses == [4, 8, 16, 32, 64]  # each pause ended by a kept probe


def test_a_dear_probe_waits_longer():
    """A probe that costs 4 plain steps more than a plain step (a check of 5, and the switch
    from plain steps and back: a GPU's graph built again around it) may add at most 3% to the
    steps paused: pauses grow past max_pause, to 150 steps."""
    length = DraftLength(max_length=4, max_pause=32, switch=0.5)
    length.record_cost(1, seconds=0.05, plain_seconds=0.01)
    for _ in range(10):
        length.record(1, 0)
    assert length._pause == 150  # ceil((5 + 0.5 - 1) / 0.03)


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
    length = DraftLength(max_length=8, cost=0.5, max_pause=32, switch=0.0)
    for _ in range(6):
        length.record(4, 0)  # pauses of 2, 4, 8, 16, 32 steps
    assert [length.next_length() for _ in range(3)] == [0, 0, 0]
    length.new_reply()
    # a pause of two (a probe costs half a step more than a plain one), then a probe
    assert [length.next_length() for _ in range(3)] == [0, 0, 1]


def test_where_a_probe_is_dear_the_first_pause_is_long_enough_to_pay_for_it():
    """A small model on a GPU: a probe costs 3 plain steps more than a plain one (a switch of
    batch shape there and back); a pause of one step before it made short replies lose 17%."""
    length = DraftLength(max_length=7, lengths=(1, 3, 7), switch=2.9)
    length._measured = {1: 1.1}
    for _ in range(8):
        length.record(1, 0)
    length.new_reply()
    steps = 0
    while length.next_length() == 0:
        steps += 1
    assert steps == 12  # ceil(3.0 / 0.25)


@pytest.mark.parametrize(
    ("max_length", "lengths"), [(16, (1, 3, 7, 15)), (8, (1, 3, 7)), (7, (1, 3, 7)), (1, (1,))]
)
def test_fixed_shapes_are_batches_of_a_power_of_two(max_length, lengths):
    assert fixed_shape_lengths(max_length) == lengths


def test_only_the_given_lengths_are_drafted():
    """On a GPU (setup.py) the length keeps to a few batch shapes: a length between them is
    never chosen, however well the drafts are kept."""
    length = DraftLength(max_length=16, cost=0.02, lengths=(1, 3, 7, 15))
    seen = set()
    for kept in (0, 2, 5, 9, 16, 16, 16):
        length.record(8, min(kept, 8))
        seen.add(length.next_length())
    assert seen <= {0, 1, 3, 7, 15} and seen & {3, 7, 15}
    assert best_length(0.99, 0.02, 16, lengths=(1, 3, 7, 15))[0] == 15
    assert best_length(0.99, 0.02, 10, lengths=(1, 3, 7, 15))[0] == 7  # none over max_length


def test_a_check_that_starts_a_run_is_charged_its_share_of_the_switch():
    """Inside a run of checks a check costs what it costs; leaving plain steps for one costs
    the switch's share of a run as well, so a dear switch keeps plain decoding plain."""
    length = DraftLength(max_length=7, lengths=(1, 3, 7), switch=30.0, run_steps=1.0)
    length._measured = {1: 1.1, 3: 1.3, 7: 1.7}
    for _ in range(8):
        length.record(7, 7)
    length.run_length = 7  # the check before was of 7 drafts
    assert length.next_length() == 7
    length.run_length = 0  # a plain step before
    assert length.next_length() == 0
    length.switch = 0.5
    length._pause = length._paused_for = 0
    assert length.next_length() == 7


def test_a_run_s_switch_and_length_are_running_means():
    length = DraftLength(switch=0.5, run_steps=4.0)
    length.record_run(10, 1.5)
    assert length.switch == pytest.approx(0.8) and length.run_steps == pytest.approx(5.8)
    length.record_run(0, 9.0)  # no checks: nothing to learn
    assert length.switch == pytest.approx(0.8)


def test_inside_a_run_the_batch_shape_changes_only_when_it_pays_for_its_graph():
    """A check of another length builds llama.cpp's graph again (half a switch): a run keeps
    its length unless another buys more than that costs."""
    length = DraftLength(max_length=7, lengths=(1, 3, 7), switch=1.0, run_steps=4.0)
    length._measured = {1: 1.12, 3: 1.38, 7: 1.61}
    for _ in range(8):
        length.record(7, 7)
    length.run_length = 1
    assert length.next_length() == 7  # 8 tokens for 1.74 steps against 2 for 1.12
    length.switch, length.run_steps = 100.0, 1.0
    length.run_length = 1
    assert length.next_length() == 1  # a graph build dearer than what 7 drafts would buy


def test_a_run_keeps_its_shape_through_empty_proposals_while_that_is_cheaper_than_leaving():
    """A small model on a GPU: a check of 7 drafts costs 0.61 steps over a plain step and a
    switch 3.5 steps, so up to five checks of padding in a row keep the run."""
    length = DraftLength(max_length=7, lengths=(1, 3, 7), switch=3.5)
    length._measured = {7: 1.61}
    assert not length.pad_empty_check(7)  # not in a run
    length.run_length = 7
    assert not length.pad_empty_check(3)  # another shape: a graph build anyway
    assert [length.pad_empty_check(7) for _ in range(6)] == [True] * 5 + [False]
    length.proposed()
    assert length.pad_empty_check(7)
    cpu = DraftLength(max_length=7, switch=0.05, run_length=7)
    cpu._measured = {7: 5.9}  # a CPU: checking 7 costs 5 steps more, switching next to nothing
    assert not cpu.pad_empty_check(7)
