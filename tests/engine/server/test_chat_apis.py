"""The Anthropic and Responses routes without an engine: their requests' turns, the tools they
offer, the stored responses, their error shapes, and their streams' events for replies that a
fake engine gives (a tool call, a stop sequence), which the tiny real model cannot be made to
write quickly."""

import asyncio
import json
from types import SimpleNamespace

import pytest

from engine.server.anthropic_routes import MessagesPlan, _message_events, plan_messages
from engine.server.anthropic_schema import CountTokensRequest, MessagesRequest
from engine.server.chat_request import ToolCallWatch, Turn
from engine.server.completion import Piece, Reply
from engine.server.config import Limits
from engine.server.engine_link import GenerationRequest
from engine.server.errors import APIError, error_body
from engine.server.response_store import ResponseStore
from engine.server.responses_routes import (
    ResponsesPlan,
    _response_events,
    _response_format,
    input_turns,
)
from engine.server.streaming import named_sse

LIMITS = Limits()
PLAIN = SimpleNamespace(template_takes_tools=False)  # the model's template does not take tools
NATIVE = SimpleNamespace(template_takes_tools=True)
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
TOOL = {"name": "f", "description": "F", "input_schema": {"type": "object"}}


def roles_and_text(messages):
    return [(m.role, m.content) for m in messages]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("Hi", [Turn("user", "Hi")]),
        ([{"role": "developer", "content": "Be brief."},
          {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "A"},
                                                         {"type": "input_text", "text": "B"}]}],
         [Turn("system", "Be brief."), Turn("user", "AB")]),
        ([{"role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
          {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
          {"type": "function_call_output", "call_id": "c1", "output": "42"}],
         [Turn("assistant", "Let me look.", calls=(CALL,)), Turn("tool", "42", call_id="c1")]),
        ([{"type": "reasoning", "summary": []}, {"role": "user", "content": "Q"}],
         [Turn("user", "Q")]),
    ],
)  # fmt: skip
def test_responses_input_items_become_turns(given, expected):
    assert input_turns(given, []) == expected


def test_responses_input_follows_the_stored_conversation():
    before = [Turn("user", "Q"), Turn("assistant", calls=(CALL,))]
    given = [{"type": "function_call_output", "call_id": "c1", "output": "42"}]
    assert input_turns(given, before) == [*before, Turn("tool", "42", call_id="c1")]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}], "input[0]"),
        ([{"role": "tool", "content": "x"}], "input[0].role"),
        ([{"role": "user", "content": "x"}, {"type": "web_search_call"}], "input[1]"),
        ([{"role": "user", "content": 5}], "input[0]"),
    ],
)
def test_unusable_responses_input_is_refused_by_name(given, named):
    with pytest.raises(APIError) as caught:
        input_turns(given, [])
    assert caught.value.status == 400 and caught.value.param.startswith(named)


def messages_body(messages, **fields):
    return MessagesRequest(model="", max_tokens=8, messages=messages, **fields)


def test_anthropic_blocks_become_the_engines_messages():
    body = messages_body(
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "...", "signature": "s"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": [{"type": "text", "text": "42"}]},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no",
                 "is_error": True},
                {"type": "text", "text": "Thanks."}]},
        ],
        system=[{"type": "text", "text": "Be brief."}],
        stop_sequences=["END"],
    )  # fmt: skip
    request = plan_messages(body, NATIVE, LIMITS, max_tokens=8).request
    assert roles_and_text(request.messages) == [
        ("system", "Be brief."), ("user", "Weather?"), ("assistant", "Looking."),
        ("tool", "42"), ("tool", "Error: no"), ("user", "Thanks."),
    ]  # fmt: skip
    calls = json.loads(request.messages[2].tool_calls_json)
    assert calls == [{"id": "toolu_1", "type": "function",
                      "function": {"name": "f", "arguments": '{"a": 1}'}}]  # fmt: skip
    assert [m.tool_call_id for m in request.messages[3:5]] == ["toolu_1", "toolu_2"]
    assert request.stop == ("END",) and request.max_tokens == 8


def test_anthropic_tools_go_to_a_system_message_when_the_template_takes_none():
    body = messages_body([{"role": "user", "content": "Hi"}], system="Be brief.", tools=[TOOL])
    plan = plan_messages(body, PLAIN, LIMITS, max_tokens=8)
    first = plan.request.messages[0]
    assert plan.tools_offered and not plan.request.tools_json
    assert first.role == "system" and first.content.startswith("Be brief.")
    assert '"name": "f"' in first.content and not plan.request.sampling.grammar


@pytest.mark.parametrize(
    ("choice", "offered", "forced"),
    [(None, True, False), ({"type": "auto"}, True, False), ({"type": "none"}, False, False),
     ({"type": "any"}, True, True), ({"type": "tool", "name": "f"}, True, True)],
)  # fmt: skip
def test_anthropic_tool_choice(choice, offered, forced):
    body = CountTokensRequest(
        messages=[{"role": "user", "content": "Hi"}], tools=[TOOL], tool_choice=choice
    )
    plan = plan_messages(body, NATIVE, LIMITS, max_tokens=1)
    assert plan.tools_offered is offered
    assert bool(plan.request.tools_json) is offered
    assert bool(plan.request.sampling.grammar) is forced


@pytest.mark.parametrize(
    ("messages", "tools", "named"),
    [
        ([{"role": "user", "content": [{"type": "image", "source": {}}]}], None,
         "messages[0].content[0]"),
        ([{"role": "user", "content": [{"type": "tool_use", "id": "x", "name": "f"}]}], None,
         "messages[0].content[0]"),
        ([{"role": "user", "content": "Hi"}], [{**TOOL, "type": "web_search_20250305"}],
         "tools[0]"),
        ([{"role": "user", "content": "Hi"}], [{**TOOL, "name": "no spaces"}],
         "tools[0].function.name"),
    ],
)  # fmt: skip
def test_unusable_anthropic_requests_are_refused_by_name(messages, tools, named):
    with pytest.raises(APIError) as caught:
        plan_messages(messages_body(messages, tools=tools), NATIVE, LIMITS, max_tokens=8)
    assert caught.value.status == 400 and caught.value.param == named


def test_errors_under_v1_messages_come_in_anthropics_shape():
    assert error_body("/v1/messages", 404, "gone") == {
        "type": "error", "error": {"type": "not_found_error", "message": "gone"}}  # fmt: skip
    assert error_body("/v1/messages/count_tokens", 503, "busy")["error"]["type"] == (
        "overloaded_error"
    )
    assert "type" not in error_body("/v1/responses", 404, "gone")  # OpenAI's shape there
    assert error_body("/v1/messagesx", 400, "x")["error"]["param"] is None


def test_the_response_store_drops_the_least_recently_used_first():
    store = ResponseStore(max_responses=2)
    store.put("a", (Turn("user", "1"),), {})
    store.put("b", (Turn("user", "2"),), {})
    assert store.get("a") is not None  # "a" is now the most recently used
    store.put("c", (Turn("user", "3"),), {})
    assert store.get("b") is None and store.get("a") and store.get("c") and len(store) == 2


def test_the_response_store_keeps_within_its_size():
    store = ResponseStore(max_chars=100)
    store.put("a", (Turn("user", "x" * 40),), {})
    store.put("b", (Turn("user", "y" * 40),), {})
    assert len(store) == 2
    store.put("c", (Turn("user", "z" * 40),), {})  # 120 characters: "a" goes
    assert store.get("a") is None and len(store) == 2
    store.put("huge", (Turn("user", "w" * 200),), {})  # larger than the store: not kept
    assert store.get("huge") is None and len(store) == 2


@pytest.mark.parametrize(
    ("texts", "sent", "calls"),
    [
        (["Hello", " there"], ["Hello", " there"], None),
        (["<tool", "_call>", '{"name": "f", "arguments": {}}', "</tool_call>"], [], ["f"]),
        (["<to", "day is"], ["<to", "day is"], None),  # released once it cannot be a call
        (["<tool_call>", "oops"], [], None),  # held to the end, then sent as text (rest)
    ],
)  # fmt: skip
def test_streamed_text_is_held_only_while_it_may_be_a_tool_call(texts, sent, calls):
    watch = ToolCallWatch(tools_offered=True)
    released = [p.text for t in texts for p in watch.feed(Piece(t))]
    found = watch.calls("".join(texts))
    assert released == sent
    assert [c["function"]["name"] for c in found or ()] == (calls or [])
    if not found:
        assert "".join(released) + watch.rest() == "".join(texts)


def job():
    from engine.server.request_log import RequestLog
    from engine.server.server_state import Job

    return Job(RequestLog(), route="/test", model="m", stream=True, client="test")


def collect(chunks) -> list[tuple[str, dict]]:
    """(event name, data) of each SSE event the chunks carry."""

    async def read():
        return "".join([chunk async for chunk in chunks])

    text = asyncio.run(read())
    events = []
    for block in text.strip().split("\n\n"):
        name, data = block.split("\n", 1)
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def engine_says(reply: Reply, texts: list[str], stop_reason: str = "eos"):
    async def pieces():
        for text in texts:
            reply.text += text
            reply.n_tokens += 1
            yield Piece(text)
        reply.stop_reason = stop_reason

    return pieces()


CALL_TEXT = ['<tool_call>{"name": "f", ', '"arguments": {"a": 1}}', "</tool_call>"]


def test_a_streamed_anthropic_tool_call_is_one_tool_use_block():
    reply = Reply()
    plan = MessagesPlan(request=GenerationRequest(), tools_offered=True)
    events = collect(_message_events(job(), plan, reply, engine_says(reply, CALL_TEXT)))
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "ping", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    block = events[1][1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "f" and block["input"] == {}
    assert block["id"].startswith("toolu_")
    delta = events[3][1]["delta"]
    assert delta["type"] == "input_json_delta" and json.loads(delta["partial_json"]) == {"a": 1}
    assert events[5][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_a_streamed_anthropic_text_reply_names_its_one_stop_sequence():
    reply = Reply()
    plan = MessagesPlan(request=GenerationRequest(stop=("END",)), tools_offered=False)
    says = engine_says(reply, ["Hel", "lo"], stop_reason="stop_string")
    events = collect(_message_events(job(), plan, reply, says))
    deltas = [d["delta"]["text"] for name, d in events if name == "content_block_delta"]
    assert deltas == ["Hel", "lo"]
    assert events[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}


def test_a_streamed_responses_function_call_and_its_stored_turns():
    reply = Reply()
    state = SimpleNamespace(responses=ResponseStore())
    plan = ResponsesPlan(GenerationRequest(), (Turn("user", "Q"),), True, {"store": True})
    numbers = iter(range(100))

    def event(kind, **data):
        return named_sse(kind, {"sequence_number": next(numbers), **data})

    chunks = _response_events(state, job(), plan, reply, engine_says(reply, CALL_TEXT), event)
    events = collect(chunks)
    assert [name for name, _ in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [d["sequence_number"] for _, d in events] == list(range(7))
    added, done = events[2][1]["item"], events[5][1]["item"]
    assert added["arguments"] == "" and added["status"] == "in_progress"
    assert done["type"] == "function_call" and json.loads(done["arguments"]) == {"a": 1}
    final = events[-1][1]["response"]
    assert final["status"] == "completed" and final["output"] == [done]
    stored = state.responses.get(final["id"])
    assert stored.turns[0] == Turn("user", "Q")
    assert stored.turns[1].calls[0]["id"] == done["call_id"]


@pytest.mark.parametrize(
    ("text", "response_format"),
    [
        (None, None),
        ({"format": {"type": "text"}}, {"type": "text"}),
        ({"format": {"type": "json_object"}}, {"type": "json_object"}),
        ({"format": {"type": "json_schema", "name": "p", "schema": {"type": "object"}}},
         {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}}}),
    ],
)  # fmt: skip
def test_responses_text_format_is_read_as_chats_response_format(text, response_format):
    assert _response_format(text) == response_format
