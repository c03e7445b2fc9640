"""The remote engine's pure parts: addresses as people type them, the request's shape, and the
stats line's figures from what a server says about a reply."""

from __future__ import annotations

import json

import pytest

from engine.enums import StopReason
from engine.remote.openai_client import (
    RemoteError,
    _done,
    chat_body,
    normalized_base_url,
    openai_messages,
)
from engine.runtime import protocol as p


@pytest.mark.parametrize(
    ("typed", "base"),
    [
        ("localhost:8080", "http://localhost:8080/v1"),
        ("http://192.168.1.20:11434/", "http://192.168.1.20:11434/v1"),
        ("https://box.lan/v1/", "https://box.lan/v1"),
        ("http://box:1234/v1/chat/completions", "http://box:1234/v1"),
        ("http://box:1234/api/v1/models", "http://box:1234/api/v1"),
        ("  http://[::1]:8080  ", "http://[::1]:8080/v1"),
    ],
)
def test_an_address_as_typed_becomes_the_apis_base(typed, base):
    assert normalized_base_url(typed) == base


@pytest.mark.parametrize("typed", ["", "   ", "ftp://box/v1", "http://"])
def test_an_address_that_cannot_be_a_server_is_refused_with_a_reason(typed):
    with pytest.raises(RemoteError, match=r"address|not an http"):
        normalized_base_url(typed)


def test_tool_calls_and_results_take_the_apis_shape():
    calls = [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]
    shaped = openai_messages(
        [
            p.ChatMessage(role="user", content="hi"),
            p.ChatMessage(role="assistant", content="", tool_calls_json=json.dumps(calls)),
            p.ChatMessage(role="tool", content="3", tool_call_id="call_1", name="add"),
        ]
    )
    assert shaped == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "3", "tool_call_id": "call_1", "name": "add"},
    ]


def test_the_request_streams_and_asks_for_usage():
    body = chat_body("m", [], p.SamplingParams(temperature=0.0, seed=7), 64)
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (64, 0.0, 7)
    assert "seed" not in chat_body("m", [], p.SamplingParams(), 64)
    assert "tools" not in chat_body("m", [], p.SamplingParams(), 64)


# (finish reason, usage, timings) -> (stop reason, generated, tok/s, counted)
DONE_CASES = [
    ("stop", {"completion_tokens": 11, "prompt_tokens": 5}, {}, StopReason.EOS, 11, 10.0, True),
    ("length", {"completion_tokens": 3}, {}, StopReason.MAX_TOKENS, 3, 2.0, True),
    ("stop", {}, {}, StopReason.EOS, 0, 0.0, False),  # a server without usage
    (StopReason.STOPPED, {}, {}, StopReason.STOPPED, 0, 0.0, False),
    # llama-server's own timings: its decode rate, the network's pauses left out
    ("stop", {"completion_tokens": 11}, {"predicted_ms": 200.0}, StopReason.EOS, 11, 55.0, True),
]


@pytest.mark.parametrize(
    ("finish", "usage", "timings", "reason", "n", "rate", "counted"), DONE_CASES
)
def test_what_the_server_said_becomes_the_stats(finish, usage, timings, reason, n, rate, counted):
    # Asked at 0 s, first text at 0.5 s, done at 1.5 s.
    done = _done(finish, usage, timings, 0.0, 0.5, 1.5)
    assert (done.stop_reason, done.stats.n_generated, done.counted) == (reason, n, counted)
    assert done.stats.time_to_first_token == pytest.approx(0.5)
    assert done.stats.decode_tokens_per_second == pytest.approx(rate)
