"""Which tools a chat offers the model, and whether a call the model asks for may run: pure
rules, so the window's prompts and the tests share them.

- A chat offers the tools of the enabled servers, less those the person turned off for it; each
  under a name the chat templates and the server's tool-call parser accept
  (`server__tool`, letters, digits, `_ . -`, at most 64).
- A call runs only when the person allowed it: once (this call), always (this tool, until the
  chat is closed), or never (this tool is refused without asking again). Until they answer, it
  waits; a refused call is answered to the model with REFUSED_TEXT so it can go on without it.
- One reply may go through at most `max_rounds` rounds of calls; past that, the model is told to
  answer with what it has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engine.tools.client import ToolInfo

MAX_ROUNDS = 5
MAX_NAME_CHARS = 64
REFUSED_TEXT = "The user did not allow this tool call. Answer without it."
ROUNDS_TEXT = "The limit on tool calls for this reply was reached. Answer with what you have."


class Answer(StrEnum):
    """What the person said when asked about a call."""

    ONCE = "once"
    ALWAYS = "always"  # this tool, for the rest of the chat
    DENY = "deny"  # this call
    NEVER = "never"  # this tool, for the rest of the chat


class Decision(StrEnum):
    RUN = "run"
    ASK = "ask"
    REFUSE = "refuse"


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for, by the name it was offered."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def offered_name(tool: ToolInfo) -> str:
    """The name a tool is offered under: its server's and its own, in the characters allowed."""
    raw = f"{tool.server}__{tool.name}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)[:MAX_NAME_CHARS]


def offered_tools(tools: Iterable[ToolInfo], turned_off: Iterable[str] = ()) -> dict[str, ToolInfo]:
    """The tools a chat offers, by offered name; the first of two that would share a name."""
    off = set(turned_off)
    offered: dict[str, ToolInfo] = {}
    for tool in tools:
        name = offered_name(tool)
        if name not in off and name not in offered:
            offered[name] = tool
    return offered


def tool_definitions(offered: dict[str, ToolInfo]) -> list[dict[str, Any]]:
    """The tools in the OpenAI shape the chat templates and engine/server/tool_calls.py read."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description,
                "parameters": tool.input_schema or {"type": "object", "properties": {}},
            },
        }
        for name, tool in offered.items()
    ]


@dataclass
class ToolPermissions:
    """What the person said about tools in one chat."""

    always: set[str] = field(default_factory=set)
    never: set[str] = field(default_factory=set)

    def decide(self, call: ToolCall, offered: dict[str, ToolInfo]) -> Decision:
        if call.name not in offered or call.name in self.never:
            return Decision.REFUSE  # not a tool this chat offers, or one refused for good
        return Decision.RUN if call.name in self.always else Decision.ASK

    def answer(self, call: ToolCall, answer: Answer) -> Decision:
        """Record the person's answer about `call`; whether it runs."""
        if answer is Answer.ALWAYS:
            self.always.add(call.name)
            self.never.discard(call.name)
        elif answer is Answer.NEVER:
            self.never.add(call.name)
            self.always.discard(call.name)
        return Decision.RUN if answer in (Answer.ONCE, Answer.ALWAYS) else Decision.REFUSE


@dataclass
class RoundCounter:
    """Rounds of tool calls in one reply."""

    max_rounds: int = MAX_ROUNDS
    used: int = 0

    def take(self) -> bool:
        """True when another round may run (and count it); False at the limit."""
        if self.used >= self.max_rounds:
            return False
        self.used += 1
        return True
