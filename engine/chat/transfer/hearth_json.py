"""Hearth's own chat file: every conversation with all its branches (the versions made by
regenerating or editing), each message's settings and stats, and its attachments.

    {"format": "hearth.chats", "version": 1, "exported_at": 1764320000.0,
     "conversations": [{"title": "...", "system_prompt": "...", "settings": {...},
                        "created_at": ..., "updated_at": ..., "active_leaf": 3,
                        "messages": [{"id": 1, "parent": null, "role": "user", "content": "...",
                                      "model": "", "settings": {}, "partial": false,
                                      "failed": false, "stop_reason": "", "stats": {...},
                                      "created_at": ..., "attachments": []}, ...]}]}

Ids are the file's own, numbered from 1 in each conversation; a message's parent comes before
it, so the file is a tree that can be read in one pass. An attachment is
{"kind": "image", "mime_type": "image/png", "name": "cat.png", "data": "<base64>"}.

The format is versioned: a reader refuses a file of a newer version, with the reason, rather
than guess at it; a later version that adds a field keeps the ones here.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields
from typing import Any

from engine.chat.store import Conversation, MessageStats, StoredMessage
from engine.chat.transfer.reading import parse_json
from engine.chat.transfer.records import (
    ATTACHMENT_TYPES,
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS_PER_MESSAGE,
    MAX_CONVERSATIONS,
    MAX_MESSAGES_PER_CHAT,
    ROLES,
    Attachment,
    ChatRecord,
    ImportedChats,
    Progress,
    TransferError,
    clean_text,
    clean_title,
    expect,
    is_number,
    kind_of,
    settings_field,
    text_field,
    time_field,
    where,
)

FORMAT = "hearth.chats"
VERSION = 1
_STATS = tuple(f.name for f in fields(MessageStats))
_COUNTS = ("n_prompt_tokens", "n_generated")


# -- writing ------------------------------------------------------------------------------------


def hearth_json(records: Iterable[ChatRecord], *, exported_at: float | None = None) -> str:
    """The chat file for `records` (ids renumbered from 1 in each conversation)."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": time.time() if exported_at is None else exported_at,
        "conversations": [_conversation_json(r) for r in records],
    }
    return json.dumps(document, ensure_ascii=False, indent=1)


def _conversation_json(record: ChatRecord) -> dict[str, Any]:
    number = {m.id: n for n, m in enumerate(record.messages, 1)}
    chat = record.conversation
    return {
        "title": chat.title,
        "system_prompt": chat.system_prompt,
        "settings": chat.settings,
        "created_at": chat.created_at,
        "updated_at": chat.updated_at,
        "active_leaf": number.get(chat.active_leaf_id),
        "messages": [
            {
                "id": number[m.id],
                "parent": number.get(m.parent_id),
                "role": m.role,
                "content": m.content,
                "model": m.model,
                "settings": m.settings,
                "partial": m.partial,
                "failed": m.failed,
                "stop_reason": m.stop_reason,
                "stats": asdict(m.stats),
                "created_at": m.created_at,
                "attachments": [
                    {
                        "kind": a.kind,
                        "mime_type": a.mime_type,
                        "name": a.name,
                        "data": base64.b64encode(a.data).decode("ascii"),
                    }
                    for a in record.attachments.get(m.id, ())
                ],
            }
            for m in record.messages
        ],
    }


# -- reading ------------------------------------------------------------------------------------


def looks_like_hearth(document: Any) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT


def parse_hearth_json(
    data: bytes, *, name: str = "The file", progress: Progress | None = None
) -> ImportedChats:
    """The conversations of a Hearth chat file; TransferError says why one is refused."""
    return read_hearth_document(parse_json(data, name), name=name, progress=progress)


def read_hearth_document(
    document: Any, *, name: str = "The file", progress: Progress | None = None
) -> ImportedChats:
    expect(
        looks_like_hearth(document),
        f"{name} is not a Hearth chat file (it has no “format”: “{FORMAT}”).",
    )
    version = document.get("version")
    expect(
        isinstance(version, int) and not isinstance(version, bool) and version >= 1,
        f"{name} has no valid version number (“version” is {kind_of(version)}).",
    )
    expect(
        version <= VERSION,
        f"{name} was written by a newer Hearth (chat file version {version}; this Hearth reads "
        f"up to {VERSION}). Update Hearth to import it.",
    )
    chats = document.get("conversations")
    expect(isinstance(chats, list), f"{name}: “conversations” should be a list.")
    expect(
        len(chats) <= MAX_CONVERSATIONS,
        f"{name} has {len(chats):,} chats, more than the {MAX_CONVERSATIONS:,} one import takes.",
    )
    records = []
    for index, chat in enumerate(chats):
        records.append(_read_conversation(chat, index))
        if progress is not None:
            progress(index + 1, len(chats))
    return ImportedChats("Hearth", tuple(records))


def _read_conversation(chat: Any, index: int) -> ChatRecord:
    at = where(index)
    expect(isinstance(chat, dict), f"{at} should be an object, not {kind_of(chat)}.")
    messages = chat.get("messages", [])
    expect(isinstance(messages, list), f"{at}: “messages” should be a list.")
    expect(
        len(messages) <= MAX_MESSAGES_PER_CHAT,
        f"{at} has {len(messages):,} messages, more than the {MAX_MESSAGES_PER_CHAT:,} a chat "
        "may have.",
    )
    seen: set[int] = set()
    stored, attachments = [], {}
    for number, message in enumerate(messages):
        m, files = _read_message(message, index, number, seen)
        seen.add(m.id)
        stored.append(m)
        if files:
            attachments[m.id] = files
    # No "active_leaf" at all (a file written by hand): show the last message's branch.
    leaf = chat.get("active_leaf", stored[-1].id if stored else None)
    expect(
        leaf is None or (isinstance(leaf, int) and leaf in seen),
        f"{at}: “active_leaf” should be the id of one of its messages or null.",
    )
    conversation = Conversation(
        id=0,
        title=clean_title(text_field(chat, "title", at, default="")) or "Imported chat",
        system_prompt=clean_text(text_field(chat, "system_prompt", at, default="")),
        settings=settings_field(chat, "settings", at),
        created_at=time_field(chat, "created_at", at),
        updated_at=time_field(chat, "updated_at", at),
        active_leaf_id=leaf,
    )
    return ChatRecord(conversation, tuple(stored), attachments)


def _read_message(
    message: Any, chat: int, number: int, seen: set[int]
) -> tuple[StoredMessage, tuple[Attachment, ...]]:
    at = where(chat, number)
    expect(isinstance(message, dict), f"{at} should be an object, not {kind_of(message)}.")
    message_id, parent = message.get("id"), message.get("parent")
    expect(
        _is_int(message_id) and message_id not in seen,
        f"{at}: “id” should be a whole number not used by another message of the chat.",
    )
    expect(
        parent is None or (_is_int(parent) and parent in seen),
        f"{at}: “parent” should be null or the id of a message before it.",
    )
    role = message.get("role")
    expect(role in ROLES, f"{at}: “role” should be “user”, “assistant” or “tool”.")
    flags = {}
    for key in ("partial", "failed"):
        value = message.get(key, False)
        expect(isinstance(value, bool), f"{at}: “{key}” should be true or false.")
        flags[key] = value
    stored = StoredMessage(
        id=message_id,
        conversation_id=0,
        parent_id=parent,
        role=role,
        content=clean_text(text_field(message, "content", at)),
        model=clean_text(text_field(message, "model", at, default="")),
        settings=settings_field(message, "settings", at),
        partial=flags["partial"],
        failed=flags["failed"],
        stop_reason=clean_title(text_field(message, "stop_reason", at, default="")),
        stats=_read_stats(message.get("stats", {}), at),
        created_at=time_field(message, "created_at", at),
    )
    return stored, _read_attachments(message.get("attachments", []), at)


def _read_stats(stats: Any, at: str) -> MessageStats:
    expect(isinstance(stats, dict), f"{at}: “stats” should be an object.")
    values = {}
    for key in _STATS:
        value = stats.get(key)
        ok = value is None or (is_number(value) and value >= 0)
        if key in _COUNTS:
            ok = value is None or (_is_int(value) and value >= 0)
        expect(ok, f"{at}: “stats.{key}” should be a number or null, not {kind_of(value)}.")
        values[key] = value
    return MessageStats(**values)


def _read_attachments(items: Any, at: str) -> tuple[Attachment, ...]:
    expect(isinstance(items, list), f"{at}: “attachments” should be a list.")
    expect(
        len(items) <= MAX_ATTACHMENTS_PER_MESSAGE,
        f"{at} has more than {MAX_ATTACHMENTS_PER_MESSAGE} attachments.",
    )
    out = []
    for item in items:
        expect(isinstance(item, Mapping), f"{at}: an attachment should be an object.")
        mime_type = item.get("mime_type")
        expect(
            item.get("kind") == "image" and mime_type in ATTACHMENT_TYPES,
            f"{at}: an attachment should be an image ({', '.join(ATTACHMENT_TYPES)}).",
        )
        encoded = item.get("data")
        expect(
            isinstance(encoded, str) and len(encoded) <= MAX_ATTACHMENT_BYTES * 4 // 3 + 4,
            f"{at}: an attachment's “data” should be base64 text of at most "
            f"{MAX_ATTACHMENT_BYTES // 2**20} MB.",
        )
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise TransferError(f"{at}: an attachment's “data” is not valid base64.") from exc
        name = item.get("name", "")
        expect(isinstance(name, str), f"{at}: an attachment's “name” should be text.")
        out.append(Attachment("image", mime_type, clean_title(name), data))
    return tuple(out)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
