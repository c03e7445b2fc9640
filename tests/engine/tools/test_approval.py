"""Which tools a chat offers and whether a call runs: unit tables."""

from __future__ import annotations

import pytest

from engine.tools.approval import (
    Answer,
    Decision,
    RoundCounter,
    ToolCall,
    ToolPermissions,
    offered_name,
    offered_tools,
    tool_definitions,
)
from engine.tools.client import ToolInfo

ADD = ToolInfo("math", "add", "Add two numbers.", {"type": "object", "properties": {"a": {}}})
WEB = ToolInfo("web search", "fetch page", "Fetch a page.")


@pytest.mark.parametrize(
    "tool, name",
    [
        (ADD, "math__add"),
        (WEB, "web_search__fetch_page"),
        (ToolInfo("s", "ü/x"), "s____x"),
        (ToolInfo("s" * 40, "t" * 40), ("s" * 40 + "__" + "t" * 40)[:64]),
    ],
)
def test_offered_names_are_ones_templates_accept(tool, name):
    assert offered_name(tool) == name


def test_tools_turned_off_for_a_chat_are_not_offered():
    offered = offered_tools([ADD, WEB, ADD], turned_off=["web_search__fetch_page"])
    assert list(offered) == ["math__add"]
    (definition,) = tool_definitions(offered)
    assert definition == {
        "type": "function",
        "function": {
            "name": "math__add",
            "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {}}},
        },
    }
    assert tool_definitions(offered_tools([WEB]))[0]["function"]["parameters"] == {
        "type": "object",
        "properties": {},
    }


OFFERED = offered_tools([ADD, WEB])
CALL = ToolCall("math__add", {"a": 1})


@pytest.mark.parametrize(
    "answers, then",
    [
        ([], Decision.ASK),  # nothing said yet: ask
        ([Answer.ONCE], Decision.ASK),  # once is this call only
        ([Answer.DENY], Decision.ASK),
        ([Answer.ALWAYS], Decision.RUN),
        ([Answer.NEVER], Decision.REFUSE),
        ([Answer.NEVER, Answer.ALWAYS], Decision.RUN),
        ([Answer.ALWAYS, Answer.NEVER], Decision.REFUSE),
    ],
)
def test_the_next_call_of_a_tool_follows_what_the_person_said(answers, then):
    permissions = ToolPermissions()
    for answer in answers:
        permissions.answer(CALL, answer)
    assert permissions.decide(CALL, OFFERED) is then


@pytest.mark.parametrize(
    "answer, runs",
    [
        (Answer.ONCE, Decision.RUN),
        (Answer.ALWAYS, Decision.RUN),
        (Answer.DENY, Decision.REFUSE),
        (Answer.NEVER, Decision.REFUSE),
    ],
)
def test_an_answer_says_whether_this_call_runs(answer, runs):
    assert ToolPermissions().answer(CALL, answer) is runs


def test_a_call_of_a_tool_not_offered_is_refused_without_asking():
    permissions = ToolPermissions(always={"ghost__tool"})
    assert permissions.decide(ToolCall("ghost__tool"), OFFERED) is Decision.REFUSE


def test_rounds_stop_at_the_limit():
    rounds = RoundCounter(max_rounds=2)
    assert [rounds.take() for _ in range(4)] == [True, True, False, False]
