"""Fuzzing the request schemas: whatever a request holds, the answer is never a 5xx, never a
traceback, and comes in bounded time (through the ASGI app, with a stand-in engine)."""

import json
import os
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.server.stand_in import app_with, call

ROUTES = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/api/chat",
          "/api/generate", "/api/show", "/v1/messages", "/v1/messages/count_tokens",
          "/v1/responses", "/v1/rerank"]  # fmt: skip
FIELDS = ["model", "messages", "prompt", "input", "max_tokens", "max_completion_tokens", "n",
          "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stream", "stream_options",
          "logprobs", "top_logprobs", "echo", "suffix", "tools", "tool_choice",
          "response_format", "format", "options", "raw", "system", "images", "encoding_format",
          "ignore_eos", "role", "content", "tool_calls", "function", "type", "json_schema",
          "schema", "pattern", "anyOf", "$ref", "items", "num_predict", "name", "query",
          "documents", "top_n", "instructions", "max_output_tokens", "previous_response_id",
          "text", "input_schema", "tool_use_id", "stop_sequences", "metadata"]  # fmt: skip

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from(["user", "assistant", "tool", "json", "json_schema", "text", "function",
                     "required", "auto", "^a{9}$", "#/$defs/x", "base64", "\ud800"]),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS), inner, max_size=5),
    ),
    max_leaves=25,
)
bodies = st.dictionaries(st.sampled_from(FIELDS), values, max_size=8)
MESSAGES = [{"role": "user", "content": "Hi"}]
APP = app_with()  # one app for every example: the stand-in engine keeps no state that matters


def _check(route: str, body) -> None:
    try:
        raw = json.dumps(body).encode()
    except (ValueError, UnicodeEncodeError):
        raw = json.dumps(body, ensure_ascii=True).encode()
    started = time.monotonic()
    status, _, content = call(APP, "POST", route, raw)
    assert time.monotonic() - started < 2.0, (route, body)
    assert status < 500, (route, body, content[:300])
    assert b"Traceback" not in content


@settings(
    max_examples=int(os.environ.get("HEARTH_FUZZ_EXAMPLES", 40)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.sampled_from(ROUTES), bodies)
def test_no_request_body_gets_a_5xx_or_a_traceback(route, body):
    _check(route, body)


@settings(
    max_examples=int(os.environ.get("HEARTH_FUZZ_EXAMPLES", 30)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.sampled_from(ROUTES[:2] + ROUTES[3:5] + ROUTES[6:9]), bodies)
def test_near_valid_requests_get_no_5xx_either(route, extra):
    body = {"messages": MESSAGES, "prompt": "Hi", "input": "Hi", "max_tokens": 2, **extra}
    _check(route, body)
