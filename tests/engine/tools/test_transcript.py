"""Tool calls in the transcript: records stored and read back, how they read, and the
conversation the model is shown with its calls and results (native tools or described)."""

from __future__ import annotations

import json

import pytest

from engine.runtime import protocol as p
from engine.tools.approval import REFUSED_TEXT, ROUNDS_TEXT
from engine.tools.servers import HTTP, STDIO, ServerConfigError, form_text, server_from_form
from engine.tools.transcript import (
    ToolRecord,
    ToolState,
    model_messages,
    record_markdown,
    status_line,
    strip_calls,
)

ADD = ToolRecord("call_1", "example__add", {"a": 2, "b": 3.5})
TOOLS = [{"type": "function", "function": {"name": "example__add", "parameters": {}}}]


def test_a_record_is_stored_and_read_back():
    done = ADD.finish(ToolState.DONE, "5.5", seconds=0.25)
    assert ToolRecord.from_json(done.to_json()) == done


@pytest.mark.parametrize(
    "text", ["", "not json", "[]", '{"name": "x"}', '{"call_id": 1, "name": "x", "state": "odd"}']
)
def test_text_that_is_not_a_record_is_not_read_as_one(text):
    assert ToolRecord.from_json(text) is None


# state -> (what the model is told, the line under the call)
STATES = [
    (ToolState.ASKING, "", "Waiting for your answer"),
    (ToolState.RUNNING, "", "Running…"),
    (ToolState.DONE, "5.5", "Ran in 0.2 s · done"),
    (ToolState.REFUSED, REFUSED_TEXT, "Not run: not allowed"),
    (ToolState.FAILED, "5.5", "Not finished"),
    (ToolState.LIMIT, ROUNDS_TEXT, "limit on tool calls"),
    (ToolState.STOPPED, "5.5", "the reply was stopped"),
]


@pytest.mark.parametrize(("state", "told", "line"), STATES)
def test_what_each_state_tells_the_model_and_the_person(state, told, line):
    record = ADD.finish(state, "5.5", seconds=0.2)
    assert record.model_text() == told or state in (ToolState.ASKING, ToolState.RUNNING)
    assert line in status_line(record)


def test_the_transcript_shows_the_arguments_and_the_result():
    text = record_markdown(ADD.finish(ToolState.DONE, "5.5"))
    assert "`example__add`" in text and '"b": 3.5' in text and "**Result**" in text
    assert "**Result**" not in record_markdown(ADD)  # not run yet
    long = record_markdown(ADD.finish(ToolState.DONE, "x" * 10), max_result_chars=4)
    assert "xxxx\n… (10 characters in all)" in long


def test_a_result_cannot_close_its_fence_and_a_name_cannot_hide_characters():
    hostile = ToolRecord("c", "odd`\u202ename").finish(ToolState.DONE, "```\n# Not a heading")
    text = record_markdown(hostile)
    assert "````\n```\n# Not a heading\n````" in text
    assert "`odd'\\u202ename`" in text


def test_calls_are_stripped_from_the_reply_text():
    assert strip_calls('Let me add.<tool_call>{"name": "a"}</tool_call>') == "Let me add."
    assert strip_calls('<tool_call>{"name": "a"}') == ""
    assert strip_calls('[TOOL_CALLS][{"name": "a", "arguments": {}}]') == ""
    assert strip_calls('{"name": "a", "arguments": {}}') == ""


# The reply as kept: its calls are the tool rows after it.
CONVERSATION = [
    p.ChatMessage(role="user", content="2 + 3.5?"),
    p.ChatMessage(role="assistant", content="Adding."),
    p.ChatMessage(role="tool", content="(shown)"),
]


def test_native_tools_get_the_calls_as_tool_calls_and_the_results_by_id():
    records = [None, None, ADD.finish(ToolState.DONE, "5.5")]
    shown, tools_json = model_messages(CONVERSATION, records, TOOLS, native=True)
    user, assistant, result = shown
    assert assistant.content == "Adding." and json.loads(assistant.tool_calls_json) == [
        ADD.as_call()
    ]
    assert (result.role, result.content, result.tool_call_id) == ("tool", "5.5", "call_1")
    assert json.loads(tools_json) == TOOLS and user == CONVERSATION[0]


def test_without_native_tools_they_are_described_and_the_call_is_written_back():
    records = [None, None, ADD.finish(ToolState.REFUSED, "")]
    system = p.ChatMessage(role="system", content="Be brief.")
    shown, tools_json = model_messages(
        [system, *CONVERSATION], [None, *records], TOOLS, native=False
    )
    assert tools_json == "" and shown[0].content.startswith("Be brief.\n\nYou can call")
    written = '<tool_call>\n{"name": "example__add", "arguments": {"a": 2, "b": 3.5}}\n</tool_call>'
    assert shown[2].content == "Adding." + written and not shown[2].tool_calls_json
    assert shown[3].content == REFUSED_TEXT


def test_an_unfinished_call_is_not_shown_to_the_model():
    shown, _ = model_messages(CONVERSATION, [None, None, ADD], TOOLS, native=True)
    assert [m.role for m in shown] == ["user", "assistant"] and not shown[1].tool_calls_json


# (transport, command line, url, headers text) -> the server, or the error's words
ARGS = ("-m", "my_server", "--root", "/a b")
HEADERS = {"Authorization": "Bearer x", "X-Team": "a:b"}
FORMS = [
    (STDIO, "python -m my_server --root '/a b'", "", "", ("python", ARGS)),
    (HTTP, "", "https://tools.lan/mcp", "Authorization: Bearer x\n\nX-Team: a:b", HEADERS),
    (STDIO, "python 'unclosed", "", "", "does not parse"),
    (STDIO, "   ", "", "", "command to start the server is missing"),
    (HTTP, "", "tools.lan/mcp", "", "http:// or https://"),
    (HTTP, "", "https://tools.lan/mcp", "no colon here", "Name: value"),
]  # fmt: skip


@pytest.mark.parametrize(("transport", "command", "url", "headers", "expected"), FORMS)
def test_the_settings_form_becomes_a_server(transport, command, url, headers, expected):
    if isinstance(expected, str):
        with pytest.raises(ServerConfigError, match=expected):
            server_from_form("tools", transport, command, url, headers)
        return
    server = server_from_form("tools", transport, command, url, headers)
    if transport == STDIO:
        assert (server.command, server.args) == expected
    else:
        assert server.headers == expected and server.url == url
    again = server_from_form("tools", transport, *form_text(server)[:1], url, form_text(server)[1])
    assert again == server  # the form shows what it was given
