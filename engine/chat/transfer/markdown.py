"""Chats as Markdown, for reading and sharing: each conversation's shown branch, with who wrote
each message and when. Other versions of a message are counted, not written out (Hearth's JSON
keeps them all); the text of the messages is already Markdown and is written as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import PurePath

from engine.chat.store import StoredMessage
from engine.chat.transfer.records import ChatRecord

USER_HEADING = "You"
TOOL_HEADING = "Tool call"


def chats_markdown(records: Iterable[ChatRecord]) -> str:
    return "\n\n---\n\n".join(chat_markdown(r) for r in records) + "\n"


def chat_markdown(record: ChatRecord) -> str:
    chat = record.conversation
    shown = shown_branch(record)
    siblings = _sibling_counts(record.messages)
    lines = [f"# {chat.title or 'Untitled chat'}", ""]
    about = [_when(chat.created_at), f"{len(shown)} message{'s' if len(shown) != 1 else ''}"]
    lines += [f"*{' · '.join(a for a in about if a)}*", ""]
    if chat.system_prompt:
        lines += ["**System prompt**", "", *_quoted(chat.system_prompt), ""]
    for m in shown:
        heading = USER_HEADING if m.role == "user" else model_label(m.model)
        which, count = siblings[m.id]
        if count > 1:
            heading += f" (version {which} of {count})"
        if m.role == "tool":  # its record, as JSON: the call, its arguments and its result
            fence = "`" * max(3, _longest_backtick_run(m.content) + 1)
            lines += [f"## {TOOL_HEADING}", "", f"{fence}json", m.content.strip(), fence, ""]
            continue
        lines += [f"## {heading}", ""]
        for a in record.attachments.get(m.id, ()):
            # named, not embedded: the images travel in Hearth's JSON export
            lines += [f"*Image: {a.name or 'unnamed'} ({len(a.data) / 1024:,.0f} KB)*", ""]
        lines += [m.content.strip() or "*(empty)*", ""]
        if m.partial:
            lines += ["*This reply was interrupted before it finished.*", ""]
        elif m.failed:
            reason = m.stop_reason.strip().rstrip(".") or "no reason given"
            lines += [f"*The reply failed: {reason}.*", ""]
    return "\n".join(lines).rstrip()


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def shown_branch(record: ChatRecord) -> list[StoredMessage]:
    """The messages from the first to the conversation's active leaf, in order."""
    by_id = {m.id: m for m in record.messages}
    path = []
    current = by_id.get(record.conversation.active_leaf_id)
    while current is not None and len(path) <= len(by_id):
        path.append(current)
        current = by_id.get(current.parent_id)
    return path[::-1]


def model_label(model: str) -> str:
    """The name a reply is headed with: the model file without its folder and .gguf."""
    if not model:
        return "Assistant"
    name = PurePath(model).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def _sibling_counts(messages: Iterable[StoredMessage]) -> dict[int, tuple[int, int]]:
    children: dict[int | None, list[int]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m.id)
    return {i: (n, len(ids)) for ids in children.values() for n, i in enumerate(ids, 1)}


def _quoted(text: str) -> list[str]:
    return [f"> {line}".rstrip() for line in text.strip().splitlines()]


def _when(timestamp: float) -> str:
    if timestamp <= 0:
        return ""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")
