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


def test_decode_rate_leaves_out_the_first_token_and_the_time_before_it():
    from benchmarks.server_concurrency import RequestResult, decode_rate

    # two streams: first tokens at 1.0 s and 2.0 s, last at 5.0 s and 6.0 s, 101 tokens each
    round_ = [
        RequestResult(ttft_s=1.0, tokens=101, ended_s=5.0, first_s=1.0),
        RequestResult(ttft_s=2.0, tokens=101, ended_s=6.0, first_s=2.0),
    ]
    assert decode_rate([round_]) == pytest.approx(200 / 5.0)
    assert decode_rate([round_, round_]) == pytest.approx(400 / 10.0)
    assert decode_rate([[]]) == 0.0


def test_each_hearth_engine_is_its_own_server_and_compared_with_llama_server():
    import argparse

    from benchmarks.server_concurrency import LevelResult, comparison, hearth_command

    args = argparse.Namespace(model="m.gguf", ctx=1024, gpu_layers=-1, threads=0)
    command = hearth_command(args, 8080, 64, engine="hearth")
    assert command[command.index("--engine") + 1] == "hearth"
    assert command[command.index("--parallel") + 1] == "64"

    def level(server, tok_s, decode, p95):
        return LevelResult(server, 16, 1, tok_s, 0.1, p95, 100, 0, decode)

    line = comparison(
        [level("hearth-engine", 300.0, 400.0, 0.5), level("llama-server", 100.0, 200.0, 1.0)],
        "hearth-engine",
        16,
    )
    assert "throughput 3.000, decode 2.000, TTFT p95 0.500" in line


def test_a_shared_system_prompt_is_one_rounds_alone_and_each_client_adds_its_own_part():
    one_round = [prompt_for(i, 8, 1, shared_words=50) for i in range(4)]
    head = one_round[0].split("\n\n")[0]
    assert len(head.split()) == 53  # "System prompt 1:" and the 50 words
    assert all(p.startswith(head + "\n\n") for p in one_round)
    assert len({p.split("\n\n")[1].split()[0] for p in one_round}) == 4  # own parts differ
    assert not prompt_for(0, 8, 2, shared_words=50).startswith(head)  # another round's differs
