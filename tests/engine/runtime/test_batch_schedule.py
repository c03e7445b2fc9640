"""Which rows a batch step computes (engine/runtime/batch_schedule.py), by table."""

from __future__ import annotations

import pytest

from engine.runtime.batch_schedule import MIN_CHUNK, Work, plan_step

CASES = {
    "decoders only": ([1, 2, 3], [], 512, [Work(1, 1, True), Work(2, 1, True), Work(3, 1, True)]),
    "a short prompt fits whole and samples": (
        [1], [(5, 20)], 512, [Work(1, 1, True), Work(5, 20, True)],
    ),
    "a long prompt is chunked by what decoders leave": (
        [1, 2], [(5, 1000)], 256, [Work(1, 1, True), Work(2, 1, True), Work(5, 254, False)],
    ),
    "prompts in arrival order share the rest": (
        [], [(5, 100), (6, 100)], 150, [Work(5, 100, True), Work(6, 50, False)],
    ),
    "the first prompt is never starved by decoders": (
        list(range(64)), [(5, 100), (6, 100)], 64,
        [Work(k, 1, True) for k in range(64)] + [Work(5, MIN_CHUNK, False)],
    ),
    "a finished prompt is skipped": ([], [(5, 0), (6, 3)], 8, [Work(6, 3, True)]),
    "nothing to do": ([], [], 512, []),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_plan_step(case):
    decoding, prompts, budget, expected = CASES[case]
    assert plan_step(decoding, prompts, budget) == expected


@pytest.mark.parametrize("budget", [1, 7, 64, 512])
def test_a_prompt_is_computed_whole_over_steps(budget):
    """Steps until the prompt is done: every token exactly once, the last chunk sampling."""
    left, chunks = 1000, []
    while left:
        (work,) = [w for w in plan_step([1, 2, 3], [(9, left)], budget) if w.key == 9]
        chunks.append(work)
        left -= work.n_tokens
    assert sum(w.n_tokens for w in chunks) == 1000
    assert [w.samples for w in chunks] == [False] * (len(chunks) - 1) + [True]
