"""The concurrency benchmark's own arithmetic and parsing (the runs themselves are by hand)."""

import pytest

from benchmarks.server_concurrency import percentile, prompt_for, sse_payloads


def test_percentiles_interpolate_between_ranks():
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    assert percentile([7.0], 95) == 7.0


def test_server_sent_events_are_read_whole_and_the_rest_kept():
    events, rest = sse_payloads(b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"b"')
    assert events == [{"a": 1}] and rest == b'data: {"b"'


def test_prompts_differ_from_the_first_word():
    prompts = [prompt_for(i, 32, run) for i in range(16) for run in range(3)]
    assert len({p.split()[0] for p in prompts}) == 48
