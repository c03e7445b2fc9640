"""Which sequence a new generation gets, what it reuses, and when it must wait (pure tables)."""

from engine.runtime.kv_slots import SlotTable, common_prefix


def _run(table: SlotTable, prompt: list[int], max_new: int):
    admission = table.plan(prompt, max_new)
    assert admission is not None
    table.apply(admission, prompt, max_new)
    return admission


def test_common_prefix_counts_the_equal_leading_tokens():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([5, 6], [5, 6, 7]) == 2


def test_a_prompt_sharing_a_running_sequences_prefix_borrows_its_cells():
    table = SlotTable(n_slots=2, n_cells=100)
    first = _run(table, [1, 2, 3, 4, 5], 10)
    table.grow(first.slot, [1, 2, 3, 4, 5])  # its prompt was decoded
    second = _run(table, [1, 2, 3, 9], 10)
    assert second.slot is not first.slot
    assert second.source is first.slot and second.reuse == 3
    assert second.slot.borrowed == 3
    # The shared cells count once: 5 + 10 for the first, 1 new + 10 for the second.
    assert table.cells_committed() == 15 + 11


def test_a_prompt_waits_for_a_shared_prefix_still_being_computed():
    table = SlotTable(n_slots=2, n_cells=100)
    first = _run(table, [1, 2, 3, 4, 5], 10)
    assert table.prefix_in_progress([1, 2, 3, 9], {first.slot.seq: [1, 2, 3, 4, 5]})
    table.grow(first.slot, [1, 2, 3, 4, 5])
    assert not table.prefix_in_progress([1, 2, 3, 9], {first.slot.seq: [1, 2, 3, 4, 5]})


def test_the_next_turn_of_a_chat_takes_its_idle_sequence_over():
    table = SlotTable(n_slots=2, n_cells=100)
    first = _run(table, [1, 2, 3], 5)
    table.grow(first.slot, [1, 2, 3, 7])
    table.release(first.slot)
    again = _run(table, [1, 2, 3, 7, 8, 9], 5)
    assert again.slot is first.slot and again.source is None and again.reuse == 4


def test_at_least_one_prompt_token_is_left_to_compute():
    table = SlotTable(n_slots=1, n_cells=100)
    first = _run(table, [1, 2, 3], 5)
    table.grow(first.slot, [1, 2, 3])
    table.release(first.slot)
    assert _run(table, [1, 2, 3], 5).reuse == 2


def test_a_generation_waits_while_running_ones_hold_the_cells():
    table = SlotTable(n_slots=3, n_cells=40)
    _run(table, [1] * 10, 20)
    assert table.plan([2] * 10, 20) is None  # 30 held, 30 more wanted, 40 cells
    assert table.plan([2] * 5, 5) is not None


def test_no_free_sequence_means_waiting():
    table = SlotTable(n_slots=1, n_cells=1000)
    _run(table, [1, 2], 5)
    assert table.plan([3, 4], 5) is None


def test_idle_sequences_give_their_cells_back_least_recently_used_first():
    table = SlotTable(n_slots=3, n_cells=50)
    old = _run(table, [1] * 20, 0)
    table.grow(old.slot, [1] * 20)
    table.release(old.slot)
    recent = _run(table, [2] * 20, 0)
    table.grow(recent.slot, [2] * 20)
    table.release(recent.slot)
    admission = table.plan([3] * 10, 10)
    assert admission is not None
    assert [s.seq for s in admission.evict] == [old.slot.seq]


def test_clearing_a_lender_makes_its_borrowers_own_the_cells():
    table = SlotTable(n_slots=2, n_cells=100)
    first = _run(table, [1, 2, 3, 4], 0)
    table.grow(first.slot, [1, 2, 3, 4])
    second = _run(table, [1, 2, 3, 5], 0)
    table.release(first.slot)
    table.truncate(first.slot, 0)
    assert second.slot.borrowed == 0
    assert second.slot.own_cells == 3
