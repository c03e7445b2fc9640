"""Tool calls in a chat's transcript: one record per call (what was asked, what became of it,
its result), kept as JSON in the conversation store as a message of role "tool"; how a record
reads in the transcript; and the conversation as the model is shown it, with its calls and
their results in the form its chat template (or an OpenAI server) takes.

Pure: the window keeps the records, the tests read them by tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from engine.runtime import protocol as p
from engine.server.tool_calls import tools_system_text
from engine.tools.approval import REFUSED_TEXT, ROUNDS_TEXT
from engine.untrusted_text import printable_line, printable_text

MAX_RECORD_CHARS = 200_000  # a stored record larger than this is not read back as one
_TAGGED_CALL = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.DOTALL)


class ToolState(StrEnum):
    ASKING = "asking"  # waiting for the person's answer
    RUNNING = "running"
    DONE = "done"  # ran; `result` is the tool's (`failed`: the tool said it failed)
    REFUSED = "refused"  # the person said no (this time, or never)
    FAILED = "failed"  # could not run: the server failed, or the tool took too long
    LIMIT = "limit"  # past the reply's limit on rounds of calls
    STOPPED = "stopped"  # the person stopped the reply before it ran


FINISHED = (ToolState.DONE, ToolState.REFUSED, ToolState.FAILED, ToolState.LIMIT)


@dataclass(frozen=True)
class ToolRecord:
    call_id: str
    name: str  # as offered: server__tool
    arguments: dict[str, Any] = field(default_factory=dict)
    state: ToolState = ToolState.ASKING
    result: str = ""
    failed: bool = False  # the tool itself said its result is an error
    seconds: float = 0.0  # how long it ran

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def finish(self, state: ToolState, result: str, *, failed: bool = False, seconds=0.0):
        return replace(self, state=state, result=result, failed=failed, seconds=seconds)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "state": str(self.state)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> ToolRecord | None:
        """A stored record, or None for text that is not one (a damaged or foreign row)."""
        if len(text) > MAX_RECORD_CHARS:
            return None
        try:
            data = json.loads(text)
            record = cls(
                call_id=str(data["call_id"]),
                name=str(data["name"]),
                arguments=dict(data.get("arguments") or {}),
                state=ToolState(data.get("state", ToolState.STOPPED)),
                result=str(data.get("result", "")),
                failed=bool(data.get("failed", False)),
                seconds=float(data.get("seconds", 0.0)),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return record

    def model_text(self) -> str:
        """What the model is told of this call."""
        if self.state is ToolState.REFUSED:
            return REFUSED_TEXT
        if self.state is ToolState.LIMIT:
            return ROUNDS_TEXT
        return self.result

    def as_call(self) -> dict[str, Any]:
        return {
            "id": self.call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


def record_markdown(record: ToolRecord, max_result_chars: int = 4000) -> str:
    """The record as the transcript shows it: the call with its arguments, then the result."""
    arguments = json.dumps(record.arguments, indent=2, ensure_ascii=False)
    # A model's arguments and a server's result are a stranger's text: each goes in a code
    # fence longer than any run of backticks in it, so it cannot close the fence and be read
    # as Markdown; and the name, which an MCP server chose, is shown escaped.
    name = printable_line(record.name).replace("`", "'")
    text = f"**Tool call** `{name}`\n\n{_fenced(arguments, 'json')}"
    if record.state in (ToolState.DONE, ToolState.FAILED) and record.result:
        shown = record.result
        if len(shown) > max_result_chars:
            shown = shown[:max_result_chars] + f"\n… ({len(record.result):,} characters in all)"
        text += (
            f"\n\n**{'Error' if record.failed or record.state is ToolState.FAILED else 'Result'}**"
        )
        text += f"\n\n{_fenced(printable_text(shown))}"
    return text


def _fenced(text: str, language: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def status_line(record: ToolRecord) -> str:
    """The line under the call: what became of it."""
    if record.state is ToolState.ASKING:
        return "Waiting for your answer: allow this call?"
    if record.state is ToolState.RUNNING:
        return "Running…"
    if record.state is ToolState.DONE:
        outcome = "the tool reported an error" if record.failed else "done"
        return f"Ran in {record.seconds:.1f} s · {outcome}"
    if record.state is ToolState.REFUSED:
        return "Not run: not allowed. The model was told."
    if record.state is ToolState.FAILED:
        return "Not finished: the model was told why (above)."
    if record.state is ToolState.LIMIT:
        return "Not run: this reply reached its limit on tool calls."
    return "Not run: the reply was stopped."


def strip_calls(text: str) -> str:
    """A reply in which calls were found, without them: the calls are kept as records and shown
    as rows of their own. Mistral's `[TOOL_CALLS]` list or a bare JSON call is the whole reply."""
    if "<tool_call>" in text:
        return _TAGGED_CALL.sub("", text).strip()
    return ""


def tagged_calls(records: Sequence[ToolRecord]) -> str:
    """The calls as the model is asked to write them when its template has no tools."""
    return "".join(
        "<tool_call>\n"
        + json.dumps({"name": r.name, "arguments": r.arguments}, ensure_ascii=False)
        + "\n</tool_call>"
        for r in records
    )


def model_messages(
    messages: Sequence[p.ChatMessage],
    records: Sequence[ToolRecord | None],
    tools: list[dict[str, Any]],
    *,
    native: bool,
) -> tuple[list[p.ChatMessage], str]:
    """(the messages, the tools JSON for the template) the model is shown.

    `records[i]` is the record behind `messages[i]` when it is a tool row (None otherwise);
    unfinished records are left out. An assistant message (its text without the calls) followed
    by tool rows carries their calls. `native`: the template (or the OpenAI server) takes
    `tools` and `tool_calls`; else the tools are described in the system message and the calls
    are written back into the reply's text in the form the model was asked for.
    """
    shown: list[p.ChatMessage] = []
    for i, (message, record) in enumerate(zip(messages, records, strict=True)):
        if record is not None:
            if record.finished:
                shown.append(
                    p.ChatMessage(
                        role="tool",
                        content=record.model_text(),
                        tool_call_id=record.call_id,
                        name=record.name,
                    )
                )
            continue
        calls = []
        for later in records[i + 1 :]:
            if later is None:
                break
            if later.finished:
                calls.append(later)
        if message.role == "assistant" and calls and native:
            calls_json = json.dumps([c.as_call() for c in calls])
            message = p.ChatMessage(
                role="assistant", content=message.content, tool_calls_json=calls_json
            )
        elif message.role == "assistant" and calls:
            message = p.ChatMessage(role="assistant", content=message.content + tagged_calls(calls))
        shown.append(message)
    if not tools:
        return shown, ""
    if native:
        return shown, json.dumps(tools)
    described = tools_system_text([t["function"] for t in tools])
    if shown and shown[0].role == "system":
        first = shown[0]
        return [
            p.ChatMessage(role="system", content=f"{first.content}\n\n{described}"),
            *shown[1:],
        ], ""
    return [p.ChatMessage(role="system", content=described), *shown], ""
