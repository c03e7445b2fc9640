"""What every chat-shaped API (OpenAI chat, Anthropic Messages, OpenAI Responses) does alike on
the way to the engine and back: a turn of the conversation as the engine takes it, tools offered
in the template or in a system message, a forced call's grammar, and, while a reply streams, the
text held back that may yet turn out to be a tool call.

Each API reads its own request shape into `Turn`s and a `ToolOffer`; tool calls travel in
OpenAI's chat shape (`{"id", "type": "function", "function": {"name", "arguments"}}`, arguments
as JSON text) because that is what chat templates that take tools render.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from engine.runtime import protocol as p
from engine.server import tool_calls as tc
from engine.server.completion import Piece
from engine.server.config import Limits
from engine.server.errors import APIError


@dataclass(frozen=True)
class Turn:
    """One message of a conversation, whatever API it came in."""

    role: str  # "system", "user", "assistant", "tool"
    content: str = ""
    calls: tuple[dict[str, Any], ...] = ()  # an assistant's tool calls, OpenAI chat-shaped
    call_id: str = ""  # a "tool" turn: the call it answers
    name: str = ""
    images: tuple[str, ...] = ()  # base64, checked (engine/server/images.py)


@dataclass(frozen=True)
class ToolOffer:
    functions: list[dict[str, Any]] = field(default_factory=list)  # checked `function` parts
    forced: bool = False  # the reply must be a call
    forced_name: str | None = None  # ... of this function (None: any offered)


def part_not_taken(where: str, what: str, takes: str) -> APIError:
    """400 for a part of a request this server does not take (`what`: "a 'image' block"),
    naming where it is and what is taken instead."""
    return APIError(400, f"{where} is {what}; this server takes {takes}.", param=where)


def checked_functions(functions: list[dict[str, Any]], limits: Limits, param: str = "tools"):
    """The functions offered, checked as OpenAI's chat `tools` are."""
    if len(functions) > limits.max_tools:
        raise APIError(400, f"At most {limits.max_tools} tools are taken.", param=param)
    return tc.tool_functions([{"type": "function", "function": f} for f in functions])


def prepared(
    turns: list[Turn], offer: ToolOffer, grammar: str, native_tools: bool
) -> tuple[tuple[p.ChatMessage, ...], str, str]:
    """(the engine's messages, the grammar, tools JSON for the template) for a conversation."""
    if offer.forced:
        if grammar:
            raise APIError(
                400, "A forced tool call and a response format cannot go together.",
                param="tool_choice",
            )  # fmt: skip
        grammar = tc.forced_call_grammar(offer.functions, offer.forced_name)
    messages = [engine_message(t, native_tools) for t in turns]
    tools_json = ""
    if offer.functions and native_tools:
        tools_json = json.dumps([{"type": "function", "function": f} for f in offer.functions])
    elif offer.functions:
        messages = _with_tools_text(messages, tc.tools_system_text(offer.functions))
    return tuple(messages), grammar, tools_json


def engine_message(turn: Turn, native_tools: bool) -> p.ChatMessage:
    content = turn.content
    if turn.calls and not native_tools:  # the model sees its calls the way it was asked for them
        content += "".join(
            "<tool_call>\n" + json.dumps(_plain_call(call)) + "\n</tool_call>"
            for call in turn.calls
        )
    return p.ChatMessage(
        role=turn.role,
        content=content,
        tool_calls_json=json.dumps(list(turn.calls)) if turn.calls and native_tools else "",
        tool_call_id=turn.call_id,
        name=turn.name,
        images=turn.images,
    )


def openai_call(call_id: str, name: str, arguments: str | dict) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def call_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A parsed call's arguments as an object (parse_tool_calls only returns objects)."""
    return json.loads(call["function"]["arguments"])


def _plain_call(call: dict) -> dict:
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: the model sees it as it was sent
            arguments = json.loads(arguments)
    return {"name": function.get("name", ""), "arguments": arguments}


def _with_tools_text(messages: list[p.ChatMessage], text: str) -> list[p.ChatMessage]:
    if messages and messages[0].role == "system":
        first = messages[0]
        merged = p.ChatMessage(role="system", content=f"{first.content}\n\n{text}".strip())
        return [merged, *messages[1:]]
    return [p.ChatMessage(role="system", content=text), *messages]


class ToolCallWatch:
    """While a reply streams with tools offered, text that may still begin a tool call is held
    back until it is known not to (the first characters decide); text after that goes straight
    through. At the end, `calls` reads the whole reply."""

    def __init__(self, tools_offered: bool):
        self.tools_offered = tools_offered
        self.deciding = tools_offered
        self.held: list[Piece] = []

    def feed(self, piece: Piece) -> list[Piece]:
        """The pieces that can be sent now as text."""
        if not self.deciding:
            return [piece]
        self.held.append(piece)
        if tc.may_begin_tool_call("".join(x.text for x in self.held)):
            return []
        self.deciding = False
        released, self.held = self.held, []
        return released

    def calls(self, reply_text: str) -> list[dict[str, Any]] | None:
        """The reply's tool calls, if it was held back whole and is one."""
        return tc.parse_tool_calls(reply_text) if self.deciding and self.tools_offered else None

    def rest(self) -> str:
        """Text still held at the end (a reply that looked like a call and was not)."""
        text, self.held = "".join(x.text for x in self.held), []
        return text
