"""Reading tool calls out of replies in the formats models write them, and refusing bad tools."""

import json

import pytest

from engine.server.errors import APIError
from engine.server.tool_calls import (
    forced_call_grammar,
    may_begin_tool_call,
    parse_tool_calls,
    tool_functions,
)


def _names_and_args(calls):
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', [("f", {"a": 1})]),
        ('<tool_call>{"name": "f", "arguments": {}}</tool_call>\n'
         '<tool_call>{"name": "g", "arguments": {"b": "x"}}</tool_call>',
         [("f", {}), ("g", {"b": "x"})]),
        ('[TOOL_CALLS] [{"name": "f", "arguments": {"a": 2}}]', [("f", {"a": 2})]),
        ('{"name": "f", "parameters": {"a": 3}}', [("f", {"a": 3})]),
        ('  {"name": "f", "arguments": "{\\"a\\": 4}"}', [("f", {"a": 4})]),
        ('[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]',
         [("f", {}), ("g", {})]),
    ],
)  # fmt: skip
def test_calls_are_read_from_each_format(text, expected):
    calls = parse_tool_calls(text)
    assert _names_and_args(calls) == expected
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in calls)


@pytest.mark.parametrize(
    "text",
    ["Paris is sunny.", '{"answer": 42}', "<tool_call>not json</tool_call>", "", "[1, 2]",
     '{"name": "f", "arguments": [1]}'],
)  # fmt: skip
def test_text_that_is_no_call_is_left_as_text(text):
    assert parse_tool_calls(text) is None


@pytest.mark.parametrize(
    ("text", "may"),
    [("", True), ("  <tool", True), ("<tool_call>{", True), ("{", True), ("[TOOL", True),
     ("Hello", False), (" The", False), ("<b>", False)],
)  # fmt: skip
def test_streaming_holds_back_only_what_may_be_a_call(text, may):
    assert may_begin_tool_call(text) is may


def test_a_tool_needs_a_plain_name():
    with pytest.raises(APIError, match="letters, digits"):
        tool_functions([{"type": "function", "function": {"name": "rm -rf /"}}])
    with pytest.raises(APIError, match="must be"):
        tool_functions([{"type": "retrieval"}])


def test_the_forced_call_grammar_names_only_the_chosen_tool():
    functions = tool_functions([
        {"type": "function", "function": {"name": "alpha"}},
        {"type": "function", "function": {"name": "beta", "parameters": {
            "type": "object", "properties": {"x": {"type": "integer"}}}}},
    ])  # fmt: skip
    grammar = forced_call_grammar(functions, "beta")
    assert "beta" in grammar and "alpha" not in grammar
    both = forced_call_grammar(functions, None)
    assert "alpha" in both and "beta" in both
    with pytest.raises(APIError, match="not among"):
        forced_call_grammar(functions, "gamma")
