"""What travels between a chat file and the conversation store: a conversation, its messages (all
branches) and their attachments, with the limits every reader holds a file to and the cleaning
every text from a file goes through.

Message and conversation ids in a ChatRecord are the file's own (or the store's, on export):
the store gives imported messages new ids, keeping the tree (parents) and the shown branch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.chat.setting_ranges import setting_problem
from engine.chat.store import Attachment, Conversation, StoredMessage

# "tool": a tool call and its result, kept as the JSON of engine/tools/transcript.py's record.
ROLES = ("user", "assistant", "tool")

# A file larger than this is refused before it is read. A ChatGPT export of several years of
# chats is a few hundred MB; reading it whole costs a few times its size in memory.
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_CONVERSATIONS = 100_000
MAX_MESSAGES_PER_CHAT = 50_000
MAX_TEXT_CHARS = 4_000_000  # one message (a pasted book is ~1M characters)
MAX_TITLE_CHARS = 500
MAX_SETTINGS = 64  # keys of a conversation's or a message's settings
MAX_SETTING_CHARS = 100_000
MAX_ATTACHMENTS_PER_MESSAGE = 16
MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
ATTACHMENT_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")

Progress = Callable[[int, int], None]  # (conversations read, of how many)


__all__ = ["Attachment"]  # the store's, carried in chat files too


class TransferError(ValueError):
    """A chat file was refused; the message says why and what to do, and nothing was changed."""


@dataclass(frozen=True)
class ChatRecord:
    conversation: Conversation
    messages: tuple[StoredMessage, ...]  # parents before their replies
    attachments: Mapping[int, tuple[Attachment, ...]] = field(default_factory=dict)  # by id


@dataclass(frozen=True)
class ImportedChats:
    """What a file held, ready for the store, and what was left out of it (one line each)."""

    source: str  # "Hearth" or "ChatGPT"
    records: tuple[ChatRecord, ...]
    notes: tuple[str, ...] = ()


# C0 and C1 controls other than tab and newline (a carriage return becomes a newline), and the
# bidi controls that would reorder a title on screen; lone surrogates cannot be stored at all.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """A message's text as it may be stored and shown: newlines made "\\n", control characters
    (a terminal's escapes, NUL) removed, lone surrogates (from `\\ud800` in JSON) made U+FFFD."""
    if text.isprintable():
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _SURROGATES.sub("\ufffd", _CONTROLS.sub("", text))


def clean_title(text: str) -> str:
    """A title on one line, without the bidi controls that could make it read as another."""
    line = " ".join(_BIDI.sub("", clean_text(text)).split())
    return line[:MAX_TITLE_CHARS]


def where(chat: int, message: int | None = None) -> str:
    """ "chat 3" or "chat 3, message 12": where in a file a problem is (counted from 1)."""
    return f"chat {chat + 1}" if message is None else f"chat {chat + 1}, message {message + 1}"


def expect(condition: bool, problem: str) -> None:
    if not condition:
        raise TransferError(problem)


def text_field(data: Mapping[str, Any], key: str, at: str, *, default: str | None = None) -> str:
    value = data.get(key, default)
    expect(isinstance(value, str), f"{at}: “{key}” should be text, not {kind_of(value)}.")
    expect(
        len(value) <= MAX_TEXT_CHARS,
        f"{at}: “{key}” is {len(value):,} characters long, more than the "
        f"{MAX_TEXT_CHARS:,} a message may have.",
    )
    return value


def time_field(data: Mapping[str, Any], key: str, at: str, *, default: float = 0.0) -> float:
    """A time in seconds since 1970 (absent or null: `default`)."""
    value = data.get(key)
    if value is None:
        return default
    expect(
        is_number(value) and 0 <= value < 1e11,
        f"{at}: “{key}” should be a time in seconds since 1970, not {kind_of(value)}.",
    )
    return float(value)


def is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (isinstance(value, int) or math.isfinite(value))
    )


def settings_field(data: Mapping[str, Any], key: str, at: str) -> dict[str, Any]:
    """A flat object of numbers, text, true/false or null (what chat settings are)."""
    value = data.get(key, {})
    expect(isinstance(value, dict), f"{at}: “{key}” should be an object, not {kind_of(value)}.")
    expect(len(value) <= MAX_SETTINGS, f"{at}: “{key}” has more than {MAX_SETTINGS} entries.")
    out: dict[str, Any] = {}
    for name, item in value.items():
        shown = f"{at}: “{key}.{clean_title(name)[:64]}”"
        ok = item is None or isinstance(item, bool) or (is_number(item) and abs(item) <= 2**53)
        if isinstance(item, str):
            ok = len(item) <= MAX_SETTING_CHARS
            item = clean_text(item)
        expect(
            ok and len(name) <= 64,
            f"{shown} should be a number, short text or true/false, not {kind_of(item)}.",
        )
        problem = setting_problem(name, item)
        expect(problem is None, f"{shown} should be {problem}, not {kind_of(item)}.")
        out[clean_title(name)] = item
    return out


def kind_of(value: Any) -> str:
    """How a refusal names a JSON value of the wrong type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number" if is_number(value) else "a number out of range"
    if isinstance(value, str):
        return "text" if len(value) <= MAX_TEXT_CHARS else "text that is too long"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
