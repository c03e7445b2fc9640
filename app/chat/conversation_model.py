"""The visible conversation as a Qt list model: one row per message.

A model + delegate (rather than one widget per message) keeps a 1,000-message chat cheap: only
the rows on screen are painted, and the rows can later come from the conversation store.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from engine.chat.images import MAX_IMAGES, MAX_IMAGES_BYTES
from engine.chat.store import Attachment
from engine.enums import StopReason
from engine.hardware.speed_of_light import gauge_text
from engine.runtime import protocol as p
from engine.runtime.speculative.summary import speculation_text
from engine.tools.transcript import ToolRecord, model_messages

ROLE_USER = "user"
ROLE_ASSISTANT = "assistant"

# Custom item-data roles the delegate reads.
MessageRole = Qt.ItemDataRole.UserRole + 1  # the ChatEntry itself
VersionRole = Qt.ItemDataRole.UserRole + 2  # bumps on every change, for the delegate's cache

_STOP_REASONS = {
    StopReason.EOS: "end of reply",
    StopReason.STOP_STRING: "stop string",
    StopReason.MAX_TOKENS: "token limit reached",
    StopReason.STOPPED: "stopped",
    StopReason.CONTEXT_FULL: "context full",
}


@dataclass(frozen=True)
class ChatEntry:
    role: str
    text: str
    author: str = ""  # who wrote it, as shown above the bubble (the model's name for replies)
    footer: str = ""  # the stats line under a finished reply, or why it ended
    streaming: bool = False
    failed: bool = False  # a reply that ended in an error; not sent back to the model
    partial: bool = False  # a reply cut short by a crash; kept, shown as incomplete
    message_id: int | None = None  # its row in the conversation store
    branches: tuple[int, int] = (1, 1)  # (which, of how many) siblings: regenerated or edited
    tool: ToolRecord | None = None  # a tool call's row (role "tool"): the call and its result
    version: int = 0
    images: tuple[Attachment, ...] = ()  # shown to the model with the text (a user's message)


def stop_reason_text(stop_reason: str) -> str:
    return _STOP_REASONS.get(stop_reason, stop_reason)


def stats_line(done: p.GenerationDone) -> str:
    """ "42.1 tok/s (61% of the 69 tok/s bound) · 0.12 s to first token · 128 tokens · end of
    reply", then with speculative decoding " · prompt lookup: 75% of 40 drafts kept, 1.8x
    speed". The bound is the speed of light on this device (engine/hardware/speed_of_light.py),
    left out where the worker knows none."""
    stats = done.stats
    reason = stop_reason_text(done.stop_reason)
    if stats.n_generated == 0:  # a remote server that gives no token counts
        return f"{stats.time_to_first_token:.2f} s to first token · {reason}"
    tokens = "1 token" if stats.n_generated == 1 else f"{stats.n_generated} tokens"
    speculation = speculation_text(stats)
    gauge = gauge_text(stats.decode_tokens_per_second, stats.bound_tokens_per_second)
    return (
        f"{stats.decode_tokens_per_second:.1f} tok/s{f' ({gauge})' if gauge else ''} · "
        f"{stats.time_to_first_token:.2f} s to first token · {tokens} · {reason}"
    ) + (f" · {speculation}" if speculation else "")


def sent_entries(entries: list[ChatEntry]) -> list[ChatEntry]:
    """The rows the model is shown: finished, not failed, with text or images, or a tool call's
    row, or the reply that asked for the calls after it (its text may be only the calls)."""
    return [
        e
        for i, e in enumerate(entries)
        if not e.streaming
        and not e.failed
        and (
            e.text.strip()
            or e.images
            or e.tool is not None
            or (i + 1 < len(entries) and entries[i + 1].tool is not None)
        )
    ]


class ConversationModel(QAbstractListModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._entries: list[ChatEntry] = []

    # -- Qt model interface ---------------------------------------------------------------------

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._entries)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = 0):
        if not index.isValid() or not 0 <= index.row() < len(self._entries):
            return None
        entry = self._entries[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return entry.text
        if role == MessageRole:
            return entry
        if role == VersionRole:
            return entry.version
        return None

    # -- editing --------------------------------------------------------------------------------

    def entries(self) -> list[ChatEntry]:
        return list(self._entries)

    def entry(self, row: int) -> ChatEntry:
        return self._entries[row]

    def append(self, entry: ChatEntry) -> int:
        row = len(self._entries)
        self.beginInsertRows(QModelIndex(), row, row)
        self._entries.append(entry)
        self.endInsertRows()
        return row

    def append_text(self, row: int, text: str) -> None:
        entry = self._entries[row]
        self._update(row, text=entry.text + text)

    def finish(self, row: int, footer: str, *, failed: bool = False) -> None:
        self._update(row, footer=footer, streaming=False, failed=failed)

    def update(self, row: int, **changes) -> None:
        self._update(row, **changes)

    def clear(self) -> None:
        self.set_entries([])

    def set_entries(self, entries: list[ChatEntry]) -> None:
        self.beginResetModel()
        self._entries = list(entries)
        self.endResetModel()

    def truncate(self, row: int) -> None:
        """Remove `row` and every row after it (a branch being replaced)."""
        if row >= len(self._entries):
            return
        self.beginRemoveRows(QModelIndex(), row, len(self._entries) - 1)
        del self._entries[row:]
        self.endRemoveRows()

    def remove(self, row: int) -> None:
        self.beginRemoveRows(QModelIndex(), row, row)
        del self._entries[row]
        self.endRemoveRows()

    def _update(self, row: int, **changes) -> None:
        entry = self._entries[row]
        self._entries[row] = replace(entry, version=entry.version + 1, **changes)
        index = self.index(row)
        self.dataChanged.emit(index, index)

    def chat_messages(self, system_prompt: str = "") -> list[p.ChatMessage]:
        """What the model sees: the system prompt, then finished messages with text or images
        (failed replies left out)."""
        system = [p.ChatMessage(role="system", content=system_prompt)] if system_prompt else []
        entries = sent_entries(self._entries)
        messages = system + entry_messages(entries)
        if not any(e.tool is not None for e in entries):
            return messages
        # Tool rows: their results, as the model was given them (engine/tools/transcript.py).
        records = [None] * len(system) + [e.tool for e in entries]
        return model_messages(messages, records, [], native=False)[0]


def entry_messages(entries: list[ChatEntry]) -> list[p.ChatMessage]:
    """The rows `entries` as the engine's messages, each with the images it sends (base64)."""
    sent = images_sent(entries)
    return [
        p.ChatMessage(
            role=e.role,
            content=e.text,
            images=tuple(base64.b64encode(a.data).decode("ascii") for a in sent[i]),
        )
        for i, e in enumerate(entries)
    ]


def images_sent(entries: list[ChatEntry]) -> list[tuple[Attachment, ...]]:
    """Which images go to the engine with each entry: the most recent ones, as many as one
    request takes (engine/chat/images.py: count and bytes); older messages go as text. A long
    chat with many pictures keeps working, and the model sees the ones asked about last."""
    budget_count, budget_bytes = MAX_IMAGES, MAX_IMAGES_BYTES
    sent: list[tuple[Attachment, ...]] = [()] * len(entries)
    for i in range(len(entries) - 1, -1, -1):
        taken = []
        for a in entries[i].images:
            if budget_count == 0 or len(a.data) > budget_bytes:
                break
            taken.append(a)
            budget_count -= 1
            budget_bytes -= len(a.data)
        sent[i] = tuple(taken)
    return sent
