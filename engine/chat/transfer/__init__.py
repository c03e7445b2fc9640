"""Chats out of Hearth and into it: Markdown and Hearth's JSON out; Hearth's JSON and a ChatGPT
data export (conversations.json, or the zip it comes in) in.

    imported = read_chat_import(path)            # TransferError: refused, with the reason
    outcome = add_to_store(store, imported)      # one transaction: all chats, or none
    Path("chats.json").write_text(hearth_json(export_records(store)))

Reading is pure (bytes in, records out) and bounded: a file too large, nested too deeply, of the
wrong types or shaped into a loop is refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path

from engine.chat.transfer.chatgpt import (
    looks_like_chatgpt,
    parse_chatgpt_json,
    read_chatgpt_document,
)
from engine.chat.transfer.hearth_json import (
    FORMAT,
    VERSION,
    hearth_json,
    looks_like_hearth,
    parse_hearth_json,
    read_hearth_document,
)
from engine.chat.transfer.markdown import chat_markdown, chats_markdown
from engine.chat.transfer.reading import parse_json, read_chat_file
from engine.chat.transfer.records import (
    Attachment,
    ChatRecord,
    ImportedChats,
    Progress,
    TransferError,
)
from engine.chat.transfer.store_io import ImportOutcome, add_to_store, export_records


def parse_chat_file(
    data: bytes, *, name: str = "The file", progress: Progress | None = None
) -> ImportedChats:
    """The chats in `data`, Hearth's JSON or ChatGPT's conversations.json, whichever it is."""
    document = parse_json(data, name)
    if looks_like_hearth(document):
        return read_hearth_document(document, name=name, progress=progress)
    if looks_like_chatgpt(document):
        return read_chatgpt_document(document, name=name, progress=progress)
    raise TransferError(
        f"{name} is neither a Hearth chat file nor a ChatGPT export's conversations.json."
    )


def read_chat_import(path: str | Path, *, progress: Progress | None = None) -> ImportedChats:
    """The chats in the file at `path` (a .json, or a ChatGPT export's .zip)."""
    name = Path(path).name
    return parse_chat_file(read_chat_file(path), name=name, progress=progress)


__all__ = [
    "FORMAT",
    "VERSION",
    "Attachment",
    "ChatRecord",
    "ImportOutcome",
    "ImportedChats",
    "TransferError",
    "add_to_store",
    "chat_markdown",
    "chats_markdown",
    "export_records",
    "hearth_json",
    "parse_chat_file",
    "parse_chatgpt_json",
    "parse_hearth_json",
    "read_chat_file",
    "read_chat_import",
]
