"""The chat page's link to the conversation store: which conversation is open, and turning stored
messages into transcript rows and back.

A streaming reply is written to the store at most every PARTIAL_WRITE_MS while it grows (marked
partial), and once more when it ends; so a crash of the app or the engine loses at most that much
text, and what is kept is shown as incomplete when the conversation is opened again. A write that
fails (a full disk, the file taken away) is said through `save_failed`; the reply still streams
and ends in the window, which must never wait on the store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.conversation_model import ROLE_ASSISTANT, ChatEntry, stop_reason_text
from engine.chat.store import ConversationStore, MessageStats, StoredMessage, default_store_path
from engine.chat.store_schema import NewerSchemaError
from engine.runtime import protocol as p
from engine.starter_model import STARTER_FILE, STARTER_LABEL
from engine.tools.transcript import ToolRecord, record_markdown, status_line

PARTIAL_WRITE_MS = 300
TITLE_CHARS = 48
INCOMPLETE_FOOTER = "Incomplete: the reply was interrupted before it finished."


def open_app_store(path=None) -> tuple[ConversationStore | None, str | None]:
    """The app's conversation store, or None and why (the chat then keeps chats in memory)."""
    path = path or default_store_path()
    try:
        return ConversationStore.open(path), None
    except NewerSchemaError as exc:
        return None, str(exc)
    except (sqlite3.Error, OSError) as exc:
        return None, (
            f"Could not open the chat history at {path} ({exc}). Chats in this session will not "
            "be saved; check that the folder is writable and the disk is not full."
        )


def title_from(text: str) -> str:
    """A conversation's first title: the start of its first message, on one line."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def author_label(model_file: str, fallback: str) -> str:
    """The name above a reply, from the model file it was written by (the same while it streams
    and when the chat is opened again): the file's stem, the starter model's short name, or
    `fallback` when the file is not known."""
    if not model_file:
        return fallback
    if Path(model_file).name == STARTER_FILE:
        return STARTER_LABEL.split(" (")[0]
    return Path(model_file).stem


def message_stats(stats: p.GenerationStats) -> MessageStats:
    return MessageStats(
        n_prompt_tokens=stats.n_prompt_tokens,
        n_generated=stats.n_generated,
        tokens_per_second=stats.decode_tokens_per_second,
        time_to_first_token=stats.time_to_first_token,
        prefill_seconds=stats.prefill_seconds,
        decode_seconds=stats.decode_seconds,
    )


def footer_for(message: StoredMessage) -> str:
    if message.partial:
        return INCOMPLETE_FOOTER
    if message.failed:
        return message.stop_reason or "The reply failed."
    s = message.stats
    if s.n_generated is None:
        return ""
    tokens = "1 token" if s.n_generated == 1 else f"{s.n_generated} tokens"
    return (
        f"{s.tokens_per_second or 0.0:.1f} tok/s · {s.time_to_first_token or 0.0:.2f} s to first "
        f"token · {tokens} · {stop_reason_text(message.stop_reason)}"
    )


class ChatSession(QObject):
    """The open conversation (None until the first message of a new chat is sent)."""

    save_failed = Signal(str)  # a write of the streaming reply failed: why, in words

    def __init__(self, store: ConversationStore, parent: QObject | None = None):
        super().__init__(parent)
        self.store = store
        self.conversation_id: int | None = None
        self._streaming_id: int | None = None
        self._streaming_text = ""
        self._dirty = False
        self._timer = QTimer(self)
        self._timer.setInterval(PARTIAL_WRITE_MS)
        self._timer.timeout.connect(self.flush_partial)

    # -- conversations --------------------------------------------------------------------------

    def ensure_conversation(self, first_text: str, settings: dict) -> int:
        if self.conversation_id is None:
            chat = self.store.create_conversation(
                title_from(first_text),
                system_prompt=settings.get("system_prompt", ""),
                settings=settings,
            )
            self.conversation_id = chat.id
        return self.conversation_id

    def entries(self, assistant_name: str) -> list[ChatEntry]:
        """The open conversation's shown branch, as transcript rows."""
        if self.conversation_id is None:
            return []
        rows = []
        images = self.store.attachments_by_message(self.conversation_id)
        for m, which, count in self.store.branch_with_versions(self.conversation_id):
            record = ToolRecord.from_json(m.content) if m.role == "tool" else None
            if record is not None:  # a tool call and its result (app/chat/tool_replies.py)
                rows.append(
                    ChatEntry(
                        role=m.role,
                        text=record_markdown(record),
                        author=f"Tool · {record.name}",
                        footer=status_line(record),
                        message_id=m.id,
                        branches=(which, count),
                        tool=record,
                    )
                )
                continue
            rows.append(
                ChatEntry(
                    role=m.role,
                    text=m.content,
                    author=author_label(m.model, assistant_name)
                    if m.role == ROLE_ASSISTANT
                    else "",
                    footer=footer_for(m) if m.role == ROLE_ASSISTANT else "",
                    failed=m.failed,
                    partial=m.partial,
                    message_id=m.id,
                    branches=(which, count),
                    images=images.get(m.id, ()),
                )
            )
        return rows

    def versions(self, message_id: int) -> tuple[int, int]:
        """(which, of how many) versions `message_id` is among its siblings."""
        siblings = self.store.siblings(message_id)
        return siblings.index(message_id) + 1, len(siblings)

    def retitle_for_first_message(self, old_text: str, new_text: str) -> bool:
        """The first message now reads `new_text` (edited, or another version shown): the
        title follows it, unless the person renamed the chat (its title is no longer the one
        made from `old_text`). True when the title changed."""
        if self.conversation_id is None:
            return False
        chat = self.store.conversation(self.conversation_id)
        new_title = title_from(new_text)
        if chat.title != title_from(old_text) or chat.title == new_title:
            return False
        self.store.rename(self.conversation_id, new_title)
        return True

    # -- a reply streaming ----------------------------------------------------------------------

    def start_reply(self, parent_id: int | None, model: str, settings: dict) -> int:
        assert self.conversation_id is not None
        self._streaming_id = self.store.add_message(
            self.conversation_id,
            ROLE_ASSISTANT,
            "",
            parent_id=parent_id,
            model=model,
            settings=settings,
            partial=True,
        )
        self._streaming_text = ""
        self._dirty = False
        self._timer.start()
        return self._streaming_id

    def continue_reply(self, message_id: int, text: str) -> None:
        """Go on writing the stored reply `message_id` (a reply cut short), from `text`."""
        self._streaming_id = message_id
        self._streaming_text = text
        self._dirty = False
        self._timer.start()

    def reply_grew(self, text: str) -> None:
        self._streaming_text = text
        self._dirty = True

    def flush_partial(self) -> None:
        if self.store.closed:  # the store went first (the app closing): no write can land now
            self._timer.stop()
            return
        if self._streaming_id is not None and self._dirty:
            self._dirty = False
            self._write(self.store.update_partial, self._streaming_id, self._streaming_text)

    def finish_reply(
        self,
        text: str,
        *,
        stats: MessageStats | None = None,
        stop_reason: str = "",
        failed: bool = False,
    ) -> None:
        if self._streaming_id is None:
            return
        message_id = self._streaming_id
        self._end()
        self._write(
            self.store.finish_message,
            message_id, text, stats=stats, stop_reason=stop_reason, failed=failed,
        )  # fmt: skip

    def interrupt_reply(self, text: str) -> None:
        """The engine died mid-reply: keep what came, marked partial."""
        if self._streaming_id is None:
            return
        message_id = self._streaming_id
        self._end()
        self._write(self.store.update_partial, message_id, text)

    def _end(self) -> None:
        self._timer.stop()
        self._streaming_id = None
        self._dirty = False

    def _write(self, write, *args, **kwargs) -> None:
        try:
            write(*args, **kwargs)
        except (sqlite3.Error, OSError) as exc:
            self.save_failed.emit(f"The reply could not be written to the chats file: {exc}")
