"""The findings of the attack run against `hearth serve` that concern what a request may do, each
reproduced through the ASGI app with a stand-in engine (no worker, milliseconds each): web
pages (Origin, simple requests), malformed fields that gave 500s, and what /health says."""

import asyncio
import json

import pytest

from engine.runtime import protocol as p
from engine.server.config import Limits, ServerConfig
from engine.server.guard import content_type_refusal, has_lone_surrogate, has_non_finite_number
from tests.engine.server.stand_in import StandInLink, app_with, call, message_of

HELLO = [{"role": "user", "content": "Hi"}]
CHAT = {"messages": HELLO, "max_tokens": 4}
# Finding 1's shape: alternatives that begin alike, nested through a recursive $ref
AMBIGUOUS = {"$defs": {"n": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/n"}},
                                       {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
             "type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}}  # fmt: skip


# -- a web page cannot drive the server (finding 1's delivery; item 2) ---------------------------


@pytest.mark.parametrize("path", ["/api/chat", "/v1/chat/completions", "/api/generate"])
def test_a_text_plain_post_from_a_web_page_is_refused_before_any_work(path):
    link = StandInLink()
    body = json.dumps({"model": "", "messages": HELLO, "prompt": "x", "format": AMBIGUOUS})
    status, _, content = call(
        app_with(link),
        "POST",
        path,
        body.encode(),
        {"content-type": "text/plain", "origin": "http://evil.example"},
    )
    assert status == 403 and "--cors-origin" in message_of(content)
    assert link.generated == []


@pytest.mark.parametrize("method", ["GET", "POST", "OPTIONS"])
def test_an_unlisted_origin_is_refused_on_every_route(method):
    status, _, content = call(app_with(), method, "/v1/models",
                              headers={"origin": "https://evil.example"})  # fmt: skip
    assert status == 403 and "evil.example" in message_of(content)


@pytest.mark.parametrize(
    ("origin", "config", "status"),
    [
        ("http://127.0.0.1:8741", ServerConfig(), 200),  # the server's own /docs page
        ("http://localhost:3000", ServerConfig(cors_origins=("http://localhost:3000",)), 200),
        ("http://localhost:3000", ServerConfig(), 403),
        ("null", ServerConfig(), 403),  # a file:// page or a sandboxed frame
        ("http://127.0.0.1:9999", ServerConfig(), 403),  # another local server's page
    ],
)  # fmt: skip
def test_which_origins_pass(origin, config, status):
    got, _, _ = call(app_with(config=config), "GET", "/v1/models", headers={"origin": origin})
    assert got == status


@pytest.mark.parametrize(
    ("method", "path", "content_type", "origin", "refused"),
    [
        ("POST", "/v1/chat/completions", "text/plain", None, True),
        ("POST", "/v1/chat/completions", "multipart/form-data; boundary=x", None, True),
        ("POST", "/v1/chat/completions", "application/x-www-form-urlencoded", None, True),
        ("POST", "/api/chat", "application/x-www-form-urlencoded", None, False),  # curl -d
        ("POST", "/api/chat", "application/x-www-form-urlencoded", b"http://a.b", True),
        ("POST", "/api/chat", "text/plain;charset=UTF-8", None, True),
        ("POST", "/v1/chat/completions", "application/json; charset=utf-8", None, False),
        ("POST", "/v1/chat/completions", "application/vnd.api+json", None, False),
        ("POST", "/v1/chat/completions", "", None, False),
        ("GET", "/v1/models", "text/plain", None, False),
    ],
)  # fmt: skip
def test_json_routes_take_json_bodies(method, path, content_type, origin, refused):
    assert bool(content_type_refusal(method, path, content_type, origin)) is refused


def test_a_non_json_body_gets_415_saying_what_to_send():
    status, _, content = call(app_with(), "POST", "/v1/chat/completions", CHAT,
                              {"content-type": "text/plain"})  # fmt: skip
    assert status == 415 and "application/json" in message_of(content)


# -- fields that gave a 500 with a traceback (findings 9, 10) ------------------------------------


@pytest.mark.parametrize("function", ["get_weather", ["a"], 7])
def test_a_tool_call_whose_function_is_not_an_object_gets_400(function):
    messages = [*HELLO, {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
                                                              "function": function}]}]  # fmt: skip
    status, _, content = call(app_with(), "POST", "/v1/chat/completions",
                              {"messages": messages, "max_tokens": 4})  # fmt: skip
    assert status == 400 and "tool_calls" in message_of(content)


def test_a_well_formed_tool_call_is_taken():
    call_ = {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        *HELLO,
        {"role": "assistant", "tool_calls": [call_]},
        {"role": "user", "content": "and?"},
    ]
    status, _, _ = call(app_with(), "POST", "/v1/chat/completions", {"messages": messages})
    assert status == 200


@pytest.mark.parametrize("stream", [False, True])
def test_echo_of_a_prompt_with_a_lone_surrogate_gets_400(stream):
    body = b'{"prompt": "a\\ud800b", "echo": true, "max_tokens": 2, "stream": %s}' % (
        b"true" if stream else b"false"
    )
    status, _, content = call(app_with(), "POST", "/v1/completions", body)
    assert status == 400 and "surrogate" in message_of(content)


@pytest.mark.parametrize(
    ("body", "lone"),
    [
        (rb'"\ud83d\ude00"', False), (rb'"\ud800"', True), (rb'"\udc00"', True),
        (rb'"\\ud800"', False), (rb'"\\\ud800"', True), (rb'"x\uD800\u0041"', True),
        (b'"plain"', False),
    ],
)  # fmt: skip
def test_lone_surrogate_escapes(body, lone):
    assert has_lone_surrogate(body) is lone


@pytest.mark.parametrize(
    ("body", "non_finite"),
    [
        (b'{"a": NaN}', True), (b'{"a":-Infinity}', True), (b'[1, Infinity]', True),
        (b'{"t": {"m": Infinity}, "b": "c, NaN"}', True),
        (b'{"a": "x: NaN"}', False),  # text that reads like one
        (b'{"image": "AAANaNInfinityBB"}', False),  # base64 holds the letters by chance
        (b'{"a": 1e308}', False), (b'not json: NaN', False),
    ],
)  # fmt: skip
def test_non_finite_numbers(body, non_finite):
    assert has_non_finite_number(body) is non_finite


def test_a_non_finite_number_gets_400_where_the_responses_api_would_echo_it():
    # found by test_fuzz_requests: `text` is sent back in the response, and Infinity cannot be
    body = b'{"input": "Hi", "max_output_tokens": 2, "text": {"model": Infinity}}'
    status, _, content = call(app_with(), "POST", "/v1/responses", body)
    assert status == 400 and "Infinity" in message_of(content)


def test_echo_with_logprobs_is_refused_rather_than_leaving_the_prompt_out():
    status, _, content = call(
        app_with(),
        "POST",
        "/v1/completions",
        {"prompt": "a", "echo": True, "logprobs": 1, "max_tokens": 2},
    )
    assert status == 400 and "echo" in message_of(content)


def test_echo_gives_the_prompt_then_the_reply():
    status, _, content = call(app_with(), "POST", "/v1/completions",
                              {"prompt": "a", "echo": True, "max_tokens": 2})  # fmt: skip
    assert status == 200 and json.loads(content)["choices"][0]["text"] == "aok"


# -- bounded work (findings 2, 3, 1) ------------------------------------------------------------


def test_the_ollama_chat_route_has_a_message_count_limit():
    link = StandInLink()
    messages = HELLO * (Limits().max_messages + 1)
    status, _, content = call(app_with(link), "POST", "/api/chat", {"messages": messages})
    assert status == 400 and str(Limits().max_messages) in message_of(content)
    assert link.generated == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {**CHAT, "response_format": {"type": "json_schema",
         "json_schema": {"name": "x", "schema": {"type": "string",
                                                 "pattern": "^a{1000000000}$"}}}}),
        ("/v1/chat/completions", {**CHAT, "response_format": {"type": "json_schema",
         "json_schema": {"name": "x", "schema": {"type": "string",
                                                 "pattern": "^a{3000000000}$"}}}}),
        ("/api/chat", {"messages": HELLO, "format": {"type": "string",
                                                     "pattern": "^(a{999}){999}$"}}),
        ("/api/chat", {"messages": HELLO, "format": AMBIGUOUS}),
        ("/v1/chat/completions", {**CHAT, "response_format": {"type": "json_schema",
         "json_schema": {"name": "x", "schema": AMBIGUOUS}}}),
    ],
)  # fmt: skip
def test_costly_schemas_get_400_naming_the_limit_before_any_translation(path, body):
    link = StandInLink()
    status, _, content = call(app_with(link), "POST", path, body)
    assert status == 400 and "limit" in message_of(content)
    assert link.generated == []


class _OverLimit(StandInLink):
    """The engine refuses every request for going over one of its bounds."""

    def __init__(self, over_limit: str, message: str):
        super().__init__()
        self.failure = p.GenerationFailed(request_id=1, message=message, over_limit=over_limit)

    async def generate(self, request):
        self.generated.append(request)
        yield self.failure


@pytest.mark.parametrize(
    ("over_limit", "says", "status"),
    [
        ("prompt", "Tokenizing the prompt (9,000,000 characters) took longer than the limit "
                   "of 20 s", 413),
        ("grammar", "The output grammar took longer than the limit of 20 s to check one token",
         422),
        ("busy", "The engine is still finishing earlier prompts; try again", 503),
        ("", "The conversation is empty.", 400),
    ],
)  # fmt: skip
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat", "/v1/messages"])
def test_a_request_over_the_engines_bounds_gets_the_bounds_status_and_words(
    over_limit, says, status, path
):
    body = {**CHAT, "model": "tiny"}
    got, headers, content = call(app_with(_OverLimit(over_limit, says)), "POST", path, body)
    assert got == status and says in content.decode()
    assert b"Traceback" not in content
    assert ("retry-after" in headers) == (status == 503)


def test_a_body_that_does_not_arrive_in_time_gets_408():
    config = ServerConfig(limits=Limits(body_seconds=0.05))

    async def never():  # the headers came, the body never does
        await asyncio.Event().wait()

    status, _, content = call(app_with(config=config), "POST", "/v1/chat/completions",
                              receive=never)  # fmt: skip
    assert status == 408 and "0.05 s" in message_of(content)


# -- what /health says (findings 2, 6) -----------------------------------------------------------


def _health(link) -> tuple[int, dict]:
    status, _, content = call(app_with(link), "GET", "/health")
    return status, json.loads(content)


def test_health_says_busy_while_a_request_is_being_prepared():
    link = StandInLink()
    link.in_flight = 1  # tokenizing: the worker itself still says idle
    status, body = _health(link)
    assert status == 200 and body["state"] == "busy" and body["requests_in_flight"] == 1


def test_health_after_the_worker_died_is_a_clear_503_not_a_500():
    link = StandInLink()
    link.model, link.crashed = None, object()
    status, body = _health(link)
    assert status == 503 and body["state"] == "crashed"
    link.restarting = True
    assert _health(link)[1]["state"] == "restarting"


def test_health_of_a_worker_that_does_not_answer():
    link = StandInLink()
    link.status_answer = None
    status, body = _health(link)
    assert status == 503 and body["state"] == "not_answering"


# -- the hostile-template notice (finding 11) ----------------------------------------------------


def test_a_replaced_chat_template_is_said_in_every_answer_to_a_post():
    link = StandInLink()
    status, headers, _ = call(app_with(link), "POST", "/v1/chat/completions", CHAT)
    assert status == 200 and "x-hearth-chat-template" not in headers
    link.template_note = ("llama.cpp's built-in 'chatml' format (the model's template failed: "
                          "it took longer than 2 s to render)\u202e")  # fmt: skip
    status, headers, _ = call(app_with(link), "POST", "/api/chat", {"messages": HELLO})
    assert status == 200 and "took longer than 2 s" in headers["x-hearth-chat-template"]
    assert "\\u202e" in headers["x-hearth-chat-template"]


def test_an_embedding_request_whose_client_goes_away_is_cancelled():
    class SlowEmbeddings(StandInLink):
        cancelled = False

        async def embed(self, inputs, timeout_s, query: str = ""):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                SlowEmbeddings.cancelled = True  # link.embed stops it in the worker then
                raise

    messages = [{"type": "http.request", "body": b'{"input": "x"}', "more_body": False}]

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.sleep(0.05)
        return {"type": "http.disconnect"}

    status, _, _ = call(app_with(SlowEmbeddings()), "POST", "/v1/embeddings", receive=receive)
    assert status == 499 and SlowEmbeddings.cancelled


def test_the_model_card_says_which_chat_format_is_used_and_why():
    from dataclasses import replace

    from tests.engine.server.stand_in import LOADED

    loaded = replace(LOADED, chat_template="llama.cpp's built-in 'chatml' format")
    link = StandInLink(replace(loaded, chat_template_problem="It tried an unsafe operation."))
    status, _, content = call(app_with(link), "GET", "/v1/models")
    meta = json.loads(content)["data"][0]["meta"]
    assert status == 200 and "unsafe" in meta["chat_template_problem"]
    assert meta["chat_template"].startswith("llama.cpp's built-in")
