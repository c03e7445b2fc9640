"""The Anthropic and Responses routes' conversions as tables: their requests' turns, the tools
they offer, the stored responses, and their error shapes; no engine needed."""

import json
from types import SimpleNamespace

import pytest

from engine.server.anthropic_routes import plan_messages
from engine.server.anthropic_schema import CountTokensRequest, MessagesRequest
from engine.server.chat_request import ToolCallWatch, Turn
from engine.server.completion import Piece
from engine.server.config import Limits
from engine.server.errors import APIError, error_body
from engine.server.response_store import ResponseStore
from engine.server.responses_routes import input_turns

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
