"""Conversations on disk: one SQLite file (stdlib sqlite3, WAL), Qt-free.

    store = ConversationStore.open(path)
    chat = store.create_conversation("Trip ideas")
    user = store.add_message(chat.id, "user", "Where to in May?")
    reply = store.add_message(chat.id, "assistant", "", parent_id=user, partial=True)
    store.update_partial(reply, "Lisbon is")          # while tokens stream, a few times a second
    store.finish_message(reply, "Lisbon is lovely.", stats=MessageStats(...))

A reply is written while it streams, flagged `partial`, and unflagged only when it ends; after a
crash of the app or the engine the partial text is on disk and marked as such. WAL with
synchronous=NORMAL makes every committed write survive the process dying (not a power cut, which
would cost at most the last few writes and never corrupt the file).

Messages form a tree through parent_id: regenerating a reply or editing a user message adds a
sibling, and the conversation's active leaf says which branch is shown.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.chat.store_schema import migrate


@dataclass(frozen=True)
class MessageStats:
    n_prompt_tokens: int | None = None
    n_generated: int | None = None
    tokens_per_second: float | None = None
    time_to_first_token: float | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None


@dataclass(frozen=True)
class Attachment:
    """A file kept with a message (an image shown to the model), its bytes in the store."""

    kind: str  # "image"
    mime_type: str
    name: str
    data: bytes


@dataclass(frozen=True)
class StoredMessage:
    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    model: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    partial: bool = False
    failed: bool = False
    stop_reason: str = ""
    stats: MessageStats = field(default_factory=MessageStats)
    created_at: float = 0.0


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    system_prompt: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    active_leaf_id: int | None = None


_CONVERSATION_COLUMNS = (
    "id, title, system_prompt, settings_json, created_at, updated_at, active_leaf_id"
)
_MESSAGE_COLUMNS = (
    "id, conversation_id, parent_id, role, content, model, settings_json, partial, failed, "
    "stop_reason, n_prompt_tokens, n_generated, tokens_per_second, time_to_first_token, "
    "prefill_seconds, decode_seconds, created_at"
)


def _conversation(row: tuple) -> Conversation:
    return Conversation(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6])


def _stats_values(s: MessageStats) -> tuple:
    """A message's stats in the order of their columns (n_prompt_tokens ... decode_seconds)."""
    return (
        s.n_prompt_tokens, s.n_generated, s.tokens_per_second, s.time_to_first_token,
        s.prefill_seconds, s.decode_seconds,
    )  # fmt: skip


def _path(messages: list[StoredMessage], leaf_id: int | None) -> list[StoredMessage]:
    """The messages from the first to `leaf_id`, in order (none without a leaf)."""
    by_id = {m.id: m for m in messages}
    path: list[StoredMessage] = []
    current = by_id.get(leaf_id) if leaf_id is not None else None
    while current is not None:
        path.append(current)
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    path.reverse()
    return path


def _message(row: tuple) -> StoredMessage:
    return StoredMessage(
        id=row[0],
        conversation_id=row[1],
        parent_id=row[2],
        role=row[3],
        content=row[4],
        model=row[5],
        settings=json.loads(row[6]),
        partial=bool(row[7]),
        failed=bool(row[8]),
        stop_reason=row[9],
        stats=MessageStats(*row[10:16]),
        created_at=row[16],
    )


class ConversationStore:
    """One open conversation database. Use it from one thread (the GUI's)."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self.closed = False

    @classmethod
    def open(cls, path: str | Path) -> ConversationStore:
        """Open (creating, or migrating to this version) the database at `path`."""
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: autocommit; each write below is its own small transaction.
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=2000")
        migrate(conn)
        return cls(conn)

    def close(self) -> None:
        self._conn.close()
        self.closed = True

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        # Autocommit connection: a write of several statements opens its own transaction.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- conversations --------------------------------------------------------------------------

    def create_conversation(
        self, title: str, *, system_prompt: str = "", settings: dict[str, Any] | None = None
    ) -> Conversation:
        now = time.time()
        cursor = self._conn.execute(
            "INSERT INTO conversations (title, system_prompt, settings_json, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?)",
            (title, system_prompt, json.dumps(settings or {}), now, now),
        )
        return self.conversation(cursor.lastrowid)

    def _row_by_id(self, table: str, columns: str, row_id: int, what: str):
        row = self._conn.execute(
            f"SELECT {columns} FROM {table} WHERE id = ?", (row_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"no {what} {row_id}")
        return row

    def conversation(self, conversation_id: int) -> Conversation:
        return _conversation(
            self._row_by_id("conversations", _CONVERSATION_COLUMNS, conversation_id, "conversation")
        )

    def conversations(self, search: str = "") -> list[Conversation]:
        """Most recently used first; `search` matches titles and message text, any case."""
        if not search.strip():
            rows = self._conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations "
                "ORDER BY updated_at DESC, id DESC"
            ).fetchall()
        else:
            pattern = "%" + _escape_like(search.strip()) + "%"
            rows = self._conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE title LIKE ?1 "
                "ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id "
                "AND m.content LIKE ?1 ESCAPE '\\') ORDER BY updated_at DESC, id DESC",
                (pattern,),
            ).fetchall()
        return [_conversation(r) for r in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        self._update_conversation(conversation_id, title=title)

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        self._update_conversation(conversation_id, system_prompt=system_prompt)

    def set_settings(self, conversation_id: int, settings: dict[str, Any]) -> None:
        self._update_conversation(conversation_id, settings_json=json.dumps(settings))

    def insert_conversations(self, chats: Sequence[tuple]) -> list[int]:
        """Add whole conversations as they were (imported from a file): titles, settings,
        times, every branch and the shown one, and the messages' attachments. Each item is
        (conversation, messages) or (conversation, messages, attachments by message id).
        Message ids are given anew; each message's parent must come before it. All or
        nothing: one transaction for every chat."""
        ids = []
        with self._transaction():
            for chat, messages, *attached in chats:
                ids.append(self._insert_conversation(chat, messages, *attached))
        return ids

    def _insert_conversation(
        self,
        chat: Conversation,
        messages: Sequence[StoredMessage],
        attachments: Mapping[int, Sequence[Attachment]] | None = None,
    ) -> int:
        cursor = self._conn.execute(
            "INSERT INTO conversations (title, system_prompt, settings_json, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?)",
            (
                chat.title,
                chat.system_prompt,
                json.dumps(chat.settings),
                chat.created_at,
                chat.updated_at,
            ),
        )
        conversation_id = int(cursor.lastrowid)
        new_ids: dict[int, int] = {}
        for m in messages:
            if m.parent_id is not None and m.parent_id not in new_ids:
                raise ValueError(f"message {m.id}'s parent {m.parent_id} does not come before it")
            cursor = self._conn.execute(
                f"INSERT INTO messages ({_MESSAGE_COLUMNS.removeprefix('id, ')}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    new_ids.get(m.parent_id) if m.parent_id is not None else None,
                    m.role,
                    m.content,
                    m.model,
                    json.dumps(m.settings),
                    int(m.partial),
                    int(m.failed),
                    m.stop_reason,
                    *_stats_values(m.stats),
                    m.created_at,
                ),
            )
            new_ids[m.id] = int(cursor.lastrowid)
            self._insert_attachments(new_ids[m.id], (attachments or {}).get(m.id, ()))
        self._conn.execute(
            "UPDATE conversations SET active_leaf_id = ? WHERE id = ?",
            (new_ids.get(chat.active_leaf_id), conversation_id),
        )
        return conversation_id

    def delete_conversation(self, conversation_id: int) -> None:
        self._conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def _update_conversation(self, conversation_id: int, **columns: Any) -> None:
        # updated_at is left alone: the list is ordered by when a chat last had a message,
        # and renaming one should not move it to the top.
        assignments = ", ".join(f"{name} = ?" for name in columns)
        self._conn.execute(
            f"UPDATE conversations SET {assignments} WHERE id = ?",
            (*columns.values(), conversation_id),
        )

    # -- messages -------------------------------------------------------------------------------

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        parent_id: int | None = None,
        model: str = "",
        settings: dict[str, Any] | None = None,
        partial: bool = False,
        attachments: Sequence[Attachment] = (),
    ) -> int:
        """Add a message (with its attachments, in order) under `parent_id` and make it the
        shown branch's end; its id."""
        now = time.time()
        with self._transaction():
            cursor = self._conn.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, model, "
                "settings_json, partial, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    parent_id,
                    role,
                    content,
                    model,
                    json.dumps(settings or {}),
                    int(partial),
                    now,
                ),
            )
            message_id = int(cursor.lastrowid)
            self._insert_attachments(message_id, attachments)
            self._conn.execute(
                "UPDATE conversations SET active_leaf_id = ?, updated_at = ? WHERE id = ?",
                (message_id, now, conversation_id),
            )
        return message_id

    def _insert_attachments(self, message_id: int, attachments: Sequence[Attachment]) -> None:
        self._conn.executemany(
            "INSERT INTO attachments (message_id, position, kind, mime_type, name, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(message_id, i, a.kind, a.mime_type, a.name, a.data)
             for i, a in enumerate(attachments)],
        )  # fmt: skip

    def attachments(self, message_id: int) -> tuple[Attachment, ...]:
        """A message's attachments, in the order they were given."""
        rows = self._conn.execute(
            "SELECT kind, mime_type, name, data FROM attachments WHERE message_id = ? "
            "ORDER BY position",
            (message_id,),
        ).fetchall()
        return tuple(Attachment(r[0], r[1], r[2], bytes(r[3])) for r in rows)

    def attachments_by_message(self, conversation_id: int) -> dict[int, tuple[Attachment, ...]]:
        """Every attachment of a conversation's messages, by message id (none: absent)."""
        rows = self._conn.execute(
            "SELECT a.message_id, a.kind, a.mime_type, a.name, a.data FROM attachments a "
            "JOIN messages m ON m.id = a.message_id WHERE m.conversation_id = ? "
            "ORDER BY a.message_id, a.position",
            (conversation_id,),
        ).fetchall()
        found: dict[int, list[Attachment]] = {}
        for r in rows:
            found.setdefault(r[0], []).append(Attachment(r[1], r[2], r[3], bytes(r[4])))
        return {k: tuple(v) for k, v in found.items()}

    def update_partial(self, message_id: int, content: str) -> None:
        """The text a reply has so far; it stays marked partial."""
        self._conn.execute(
            "UPDATE messages SET content = ?, partial = 1 WHERE id = ?", (content, message_id)
        )

    def finish_message(
        self,
        message_id: int,
        content: str,
        *,
        stats: MessageStats | None = None,
        stop_reason: str = "",
        failed: bool = False,
    ) -> None:
        self._conn.execute(
            "UPDATE messages SET content = ?, partial = 0, failed = ?, stop_reason = ?, "
            "n_prompt_tokens = ?, n_generated = ?, tokens_per_second = ?, "
            "time_to_first_token = ?, prefill_seconds = ?, decode_seconds = ? WHERE id = ?",
            (
                content,
                int(failed),
                stop_reason,
                *_stats_values(stats or MessageStats()),
                message_id,
            ),
        )

    def message(self, message_id: int) -> StoredMessage:
        return _message(self._row_by_id("messages", _MESSAGE_COLUMNS, message_id, "message"))

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        """Every message of the conversation, every branch, oldest first."""
        rows = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        ).fetchall()
        return [_message(r) for r in rows]

    def branch(self, conversation_id: int, leaf_id: int | None = None) -> list[StoredMessage]:
        """The messages from the first to `leaf_id` (default: the active leaf), in order."""
        if leaf_id is None:
            leaf_id = self.conversation(conversation_id).active_leaf_id
        return _path(self.messages(conversation_id), leaf_id)

    def branch_with_versions(self, conversation_id: int) -> list[tuple[StoredMessage, int, int]]:
        """The shown branch, each message with (which version, of how many) among its siblings;
        the conversation's messages read once, for opening long conversations quickly."""
        leaf_id = self.conversation(conversation_id).active_leaf_id
        messages = self.messages(conversation_id)
        children: dict[int | None, list[int]] = {}
        for m in messages:
            children.setdefault(m.parent_id, []).append(m.id)
        out = []
        for m in _path(messages, leaf_id):
            siblings = children[m.parent_id]
            out.append((m, siblings.index(m.id) + 1, len(siblings)))
        return out

    def siblings(self, message_id: int) -> list[int]:
        """Ids of the messages sharing `message_id`'s parent (itself included), oldest first."""
        m = self.message(message_id)
        rows = self._conn.execute(
            "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY id",
            (m.conversation_id, m.parent_id),
        ).fetchall()
        return [r[0] for r in rows]

    def latest_leaf(self, message_id: int) -> int:
        """The end of the newest branch below `message_id` (itself when it has no replies)."""
        current = message_id
        while True:
            row = self._conn.execute(
                "SELECT id FROM messages WHERE parent_id = ? ORDER BY id DESC LIMIT 1", (current,)
            ).fetchone()
            if row is None:
                return current
            current = row[0]

    def set_active_leaf(self, conversation_id: int, message_id: int | None) -> None:
        self._update_conversation(conversation_id, active_leaf_id=message_id)

    def delete_message(self, message_id: int) -> None:
        """Delete one message; its replies move up to its parent, so the thread stays whole."""
        m = self.message(message_id)
        with self._transaction():
            self._conn.execute(
                "UPDATE messages SET parent_id = ? WHERE parent_id = ?", (m.parent_id, m.id)
            )
            leaf = self.conversation(m.conversation_id).active_leaf_id
            if leaf == m.id:
                self._conn.execute(
                    "UPDATE conversations SET active_leaf_id = ? WHERE id = ?",
                    (m.parent_id, m.conversation_id),
                )
            self._conn.execute("DELETE FROM messages WHERE id = ?", (m.id,))


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def default_store_path() -> Path:
    """Where the app keeps its conversations, in Hearth's data folder (engine/paths.py)."""
    from engine.paths import data_dir

    return data_dir() / "conversations.sqlite3"
