"""Reading a chat file: its bytes, bounded (a JSON file, or the zip a ChatGPT data export comes
in), and its JSON, refused with the reason when it is not JSON a reader can walk safely.

A zip is read only for its conversations.json, and only as many bytes as a chat file may have,
however large the zip says the file is: a zip bomb stops at the limit.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

from engine.chat.transfer.records import MAX_FILE_BYTES, TransferError

CHATGPT_MEMBER = "conversations.json"
MAX_ZIP_MEMBERS = 100_000
_CHUNK = 1 << 20


def read_chat_file(path: str | Path, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The JSON bytes of the chat file at `path` (or of the conversations.json in a zip)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if zipfile.is_zipfile(path):
            return _read_zip_member(path, limit)
        _refuse_size(path.name, size, limit)
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise TransferError(f"Could not read {path.name}: {exc.strerror or exc}.") from exc
    _refuse_size(path.name, len(data), limit)
    return data


def _refuse_size(name: str, size: int, limit: int) -> None:
    if size > limit:
        raise TransferError(
            f"{name} is {size / 2**20:,.0f} MB, more than the {limit / 2**20:,.0f} MB a chat "
            "file may have. Export fewer chats at a time."
        )


def _read_zip_member(path: Path, limit: int) -> bytes:
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_ZIP_MEMBERS:
                raise TransferError(f"{path.name} holds more than {MAX_ZIP_MEMBERS:,} files.")
            wanted = [i for i in infos if Path(i.filename).name == CHATGPT_MEMBER]
            if not wanted:
                raise TransferError(
                    f"{path.name} has no {CHATGPT_MEMBER}. Choose the zip of a ChatGPT data "
                    "export, or a Hearth chat file (.json)."
                )
            info = min(wanted, key=lambda i: i.filename.count("/"))  # the outermost
            _refuse_size(CHATGPT_MEMBER, info.file_size, limit)
            # The header's size may lie: read no more than the limit, whatever it says.
            chunks, total = [], 0
            with archive.open(info) as member:
                while chunk := member.read(_CHUNK):
                    total += len(chunk)
                    _refuse_size(CHATGPT_MEMBER, total, limit)
                    chunks.append(chunk)
            return b"".join(chunks)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        NotImplementedError,
        EOFError,
    ) as exc:
        raise TransferError(f"{path.name} is a damaged or unsupported zip ({exc}).") from exc
    except RuntimeError as exc:  # an encrypted member
        raise TransferError(f"{path.name} could not be opened ({exc}).") from exc


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(data: bytes, name: str) -> Any:
    """The JSON value in `data` (UTF-8, with or without a BOM)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TransferError(
            f"{name} is not UTF-8 text (byte {exc.start:,} cannot be read), so not a chat file."
        ) from exc
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError as exc:
        raise TransferError(f"{name} is nested too deeply to be a chat file.") from exc
    except ValueError as exc:  # JSONDecodeError, NaN, an integer of thousands of digits
        raise TransferError(f"{name} is not valid JSON ({exc}).") from exc
