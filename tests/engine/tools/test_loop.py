"""A reply with tools, against the example MCP server in-process and a scripted model: a call
approved and run, one denied, one refused for good, a failing tool, and the round limit."""

from __future__ import annotations

import functools
import json

from mcp.client._memory import InMemoryTransport

from engine.runtime import protocol as p
from engine.tools.approval import (
    REFUSED_TEXT,
    ROUNDS_TEXT,
    Answer,
    RoundCounter,
    ToolPermissions,
    offered_tools,
)
from engine.tools.client import ToolError, ToolInfo, ToolResult, call_tool, list_tools
from engine.tools.loop import run_tool_loop
from engine.tools.servers import STDIO, McpServer

from .example_server import server as example_server

EXAMPLE = McpServer("example", STDIO, "unused: the server runs in-process")


def _connect():
    return InMemoryTransport(example_server)


def _run(tool: ToolInfo, arguments: dict) -> ToolResult:
    return call_tool(EXAMPLE, tool.name, arguments, timeout_s=5, connect=_connect)


@functools.cache
def _offered() -> dict[str, ToolInfo]:
    return offered_tools(list_tools(EXAMPLE, connect=_connect))


def _call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


class ScriptedModel:
    """Answers from a list, and keeps what it was shown each time."""

    def __init__(self, *replies: str):
        self.replies = list(replies)
        self.seen: list[list[p.ChatMessage]] = []

    def __call__(self, messages: list[p.ChatMessage]) -> str:
        self.seen.append(list(messages))
        return self.replies.pop(0)


QUESTION = [p.ChatMessage(role="user", content="What is 2 + 3.5?")]


def _loop(model, answers=(), permissions=None, rounds=None):
    asked = []
    answers = list(answers)

    def ask(call):
        asked.append(call)
        return answers.pop(0)

    outcome = run_tool_loop(
        QUESTION,
        offered=_offered(),
        permissions=permissions or ToolPermissions(),
        generate=model,
        ask=ask,
        run=_run,
        rounds=rounds,
    )
    return outcome, asked


def test_an_approved_call_runs_and_its_result_is_fed_back():
    model = ScriptedModel(_call("example__add", a=2, b=3.5), "It is 5.5.")
    outcome, asked = _loop(model, [Answer.ONCE])
    assert outcome.reply == "It is 5.5."
    assert [c.name for c in asked] == ["example__add"]
    (step,) = outcome.steps
    assert (
        step.ran and step.result == ToolResult("5.5") and step.call.arguments == {"a": 2, "b": 3.5}
    )
    call_message, result_message = outcome.added
    assert call_message.role == "assistant"
    assert json.loads(call_message.tool_calls_json)[0]["function"]["name"] == "example__add"
    assert (result_message.role, result_message.content) == ("tool", "5.5")
    assert result_message.tool_call_id == json.loads(call_message.tool_calls_json)[0]["id"]
    assert model.seen[1][-1] == result_message  # the model saw the result


def test_a_denied_call_does_not_run_and_the_model_is_told():
    model = ScriptedModel(_call("example__add", a=1, b=1), "I could not add them.")
    outcome, _asked = _loop(model, [Answer.DENY])
    (step,) = outcome.steps
    assert not step.ran and step.result.text == REFUSED_TEXT
    assert model.seen[1][-1].content == REFUSED_TEXT


def test_always_and_never_are_not_asked_again():
    permissions = ToolPermissions()
    model = ScriptedModel(
        _call("example__add", a=1, b=2),
        _call("example__add", a=3, b=4) + _call("example__echo", text="hi"),
        "done",
    )
    outcome, asked = _loop(model, [Answer.ALWAYS, Answer.NEVER], permissions)
    assert [c.name for c in asked] == ["example__add", "example__echo"]
    assert [(s.call.name, s.ran, s.result.text) for s in outcome.steps] == [
        ("example__add", True, "3.0"),
        ("example__add", True, "7.0"),
        ("example__echo", False, REFUSED_TEXT),
    ]
    assert permissions.never == {"example__echo"}


def test_a_failing_tool_and_an_unreachable_one_end_with_a_message_for_the_model():
    def broken(tool, arguments):
        raise ToolError("example did not finish running hang within 5 s and was stopped.")

    model = ScriptedModel(_call("example__fail"), "It failed.")
    outcome, _ = _loop(model, [Answer.ONCE])
    assert outcome.steps[0].result.failed and outcome.reply == "It failed."
    model = ScriptedModel(_call("example__hang"), "It timed out.")
    outcome = run_tool_loop(
        QUESTION, offered=_offered(), permissions=ToolPermissions(always={"example__hang"}),
        generate=model, ask=lambda call: Answer.DENY, run=broken,
    )  # fmt: skip
    assert "did not finish" in outcome.steps[0].result.text and outcome.reply == "It timed out."


def test_the_round_limit_ends_the_calls():
    model = ScriptedModel(*[_call("example__echo", text=str(i)) for i in range(3)], "final")
    outcome, _ = _loop(
        model, permissions=ToolPermissions(always={"example__echo"}), rounds=RoundCounter(2)
    )
    assert [s.result.text for s in outcome.steps] == ["0", "1"]
    assert outcome.hit_round_limit and outcome.reply == "final"
    assert model.seen[-1][-1].content == ROUNDS_TEXT


def test_a_reply_without_calls_or_without_tools_offered_is_the_answer():
    model = ScriptedModel("Just text.")
    assert _loop(model)[0].reply == "Just text."
    outcome = run_tool_loop(
        QUESTION, offered={}, permissions=ToolPermissions(), generate=ScriptedModel(_call("x")),
        ask=lambda call: Answer.ONCE, run=_run,
    )  # fmt: skip
    assert outcome.steps == () and outcome.reply == _call("x")
