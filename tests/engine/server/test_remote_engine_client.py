"""The chat window's remote engine client (engine/remote) against a real `hearth serve` on the
starter model: its model list, a streamed reply with usage for the stats line, a stop, and a
wrong key refused with a message that says so."""

from __future__ import annotations

import threading

import pytest

from engine.enums import StopReason
from engine.remote.openai_client import (
    Endpoint,
    RemoteDone,
    RemoteError,
    chat_body,
    list_models,
    stream_chat,
)
from engine.runtime import protocol as p

GREEDY = p.SamplingParams(temperature=0.0)


def _endpoint(served, key=None) -> Endpoint:
    return Endpoint(served.base_url, served.key if key is None else key)


def _ask(served, stop: threading.Event, max_tokens=8):
    body = chat_body(
        served.model, [p.ChatMessage(role="user", content="Say hello.")], GREEDY, max_tokens
    )
    return stream_chat(_endpoint(served), body, stop)


def test_the_servers_models_are_listed(served):
    assert served.model in list_models(_endpoint(served))


def test_a_reply_streams_with_the_servers_token_counts(served):
    pieces = list(_ask(served, threading.Event()))
    *texts, done = pieces
    assert isinstance(done, RemoteDone) and texts and all(isinstance(t, str) for t in texts)
    assert done.counted and done.stats.n_generated == 8 and done.stats.n_prompt_tokens > 0
    assert done.stop_reason == StopReason.MAX_TOKENS
    assert done.stats.time_to_first_token > 0 and done.stats.decode_tokens_per_second > 0


def test_a_stop_ends_the_reply_early(served):
    stop = threading.Event()
    seen = []
    for piece in _ask(served, stop, max_tokens=200):
        seen.append(piece)
        stop.set()  # after the first piece
    done = seen[-1]
    assert done.stop_reason == StopReason.STOPPED and len(seen) == 2


def test_a_wrong_key_is_refused_with_what_to_do(served):
    with pytest.raises(RemoteError, match=r"refused the API key \(401.*Check the key"):
        list_models(_endpoint(served, key="wrong"))
