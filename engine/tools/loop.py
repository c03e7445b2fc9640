"""One reply with tools: the model answers; if it asks for tool calls, each is allowed or not
(engine/tools/approval.py: asking the person when they have not said), run, and its result fed
back; the model answers again, until it answers without calls or the round limit is reached.

Qt-free and synchronous, with its three actions given by the caller: `generate` (the messages so
far -> the model's reply text), `ask` (a call the person has not decided on -> their Answer) and
`run` (a tool and its arguments -> its result), for a caller that may block while it asks (a
command line). The window drives the same rounds from its signals instead, with the same rules
(app/chat/tool_replies.py), rather than hold a thread waiting on the person's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.runtime import protocol as p
from engine.server.tool_calls import parse_tool_calls
from engine.tools.approval import (
    REFUSED_TEXT,
    ROUNDS_TEXT,
    Answer,
    Decision,
    RoundCounter,
    ToolCall,
    ToolPermissions,
)
from engine.tools.client import ToolError, ToolInfo, ToolResult

Generate = Callable[[list[p.ChatMessage]], str]
Ask = Callable[[ToolCall], Answer]
Run = Callable[[ToolInfo, dict], ToolResult]


@dataclass(frozen=True)
class ToolStep:
    """One call and what became of it, as the transcript shows it."""

    call: ToolCall
    ran: bool
    result: ToolResult  # the tool's, or what the model was told instead (refused, failed)


@dataclass(frozen=True)
class ToolLoopOutcome:
    reply: str  # the model's last answer
    added: tuple[p.ChatMessage, ...]  # the calls and results, in order, after the given messages
    steps: tuple[ToolStep, ...]
    hit_round_limit: bool = False


def run_tool_loop(
    messages: Sequence[p.ChatMessage],
    *,
    offered: dict[str, ToolInfo],
    permissions: ToolPermissions,
    generate: Generate,
    ask: Ask,
    run: Run,
    rounds: RoundCounter | None = None,
) -> ToolLoopOutcome:
    rounds = rounds or RoundCounter()
    history = list(messages)
    added: list[p.ChatMessage] = []
    steps: list[ToolStep] = []
    limit_hit = False
    while True:
        reply = generate(history)
        calls = parse_tool_calls(reply) if offered else None
        if not calls or limit_hit:
            return ToolLoopOutcome(reply, tuple(added), tuple(steps), limit_hit)
        turn = [p.ChatMessage(role="assistant", content=reply, tool_calls_json=json.dumps(calls))]
        if not rounds.take():
            # Past the limit: every call is answered with the limit, and the model answers once
            # more without running any.
            limit_hit = True
            turn += [_tool_message(c, ToolResult(ROUNDS_TEXT, failed=True)) for c in calls]
        else:
            for raw in calls:
                step = _one_call(raw, offered, permissions, ask, run)
                steps.append(step)
                turn.append(_tool_message(raw, step.result))
        history += turn
        added += turn


def _one_call(
    raw: dict, offered: dict[str, ToolInfo], permissions: ToolPermissions, ask: Ask, run: Run
) -> ToolStep:
    function = raw["function"]
    call = ToolCall(function["name"], json.loads(function["arguments"]))
    decision = permissions.decide(call, offered)
    if decision is Decision.ASK:
        decision = permissions.answer(call, ask(call))
    if decision is not Decision.RUN:
        return ToolStep(call, False, ToolResult(REFUSED_TEXT, failed=True))
    try:
        return ToolStep(call, True, run(offered[call.name], call.arguments))
    except ToolError as exc:  # the model is told, and may answer without it
        return ToolStep(call, True, ToolResult(str(exc), failed=True))


def _tool_message(raw: dict, result: ToolResult) -> p.ChatMessage:
    return p.ChatMessage(
        role="tool", content=result.text, tool_call_id=raw["id"], name=raw["function"]["name"]
    )
