"""Reading a chat file from disk: a .json, or the zip of a ChatGPT export; too large, a zip bomb
or a zip without conversations.json is refused before it is parsed."""

from __future__ import annotations

import json
import zipfile

import pytest

from engine.chat.transfer import TransferError, read_chat_file, read_chat_import

from .chatgpt_export import conversation


def test_a_json_file_is_read_whole(tmp_path):
    path = tmp_path / "chats.json"
    path.write_bytes(b'{"a": 1}')
    assert read_chat_file(path) == b'{"a": 1}'


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2048)
    with pytest.raises(TransferError, match=r"big\.json is .* MB, more than"):
        read_chat_file(path, limit=1024)


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(TransferError, match=r"Could not read gone\.json"):
        read_chat_file(tmp_path / "gone.json")


def test_a_chatgpt_export_zip_is_read_for_its_conversations(tmp_path):
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("chat.html", "<html></html>")
        z.writestr("conversations.json", json.dumps([conversation()]))
    imported = read_chat_import(path)
    assert imported.source == "ChatGPT" and len(imported.records) == 1


def test_a_zip_without_conversations_is_refused(tmp_path):
    path = tmp_path / "photos.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("cat.png", b"png")
    with pytest.raises(TransferError, match=r"photos\.zip has no conversations\.json"):
        read_chat_file(path)


def test_a_zip_bomb_stops_at_the_limit(tmp_path):
    # 8 MiB of zeros compress to a few KB; the limit is 1 MiB
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", b"0" * (8 << 20))
    assert path.stat().st_size < 100_000
    with pytest.raises(TransferError, match="more than the 1 MB"):
        read_chat_file(path, limit=1 << 20)


def test_a_zip_that_lies_about_its_size_stops_at_the_limit(tmp_path):
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", b"0" * (4 << 20))
    data = bytearray(path.read_bytes())
    # the central directory's "uncompressed size" of the member, made small
    at = data.rfind(b"PK\x01\x02")
    data[at + 24 : at + 28] = (100).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(TransferError):
        read_chat_file(path, limit=1 << 20)


def test_a_damaged_zip_is_refused(tmp_path):
    path = tmp_path / "broken.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps([conversation()]) * 50)
    data = bytearray(path.read_bytes())
    data[60:200] = b"\x00" * 140  # inside the compressed member
    path.write_bytes(bytes(data))
    with pytest.raises(TransferError, match=r"damaged or unsupported zip|not valid JSON"):
        read_chat_import(path)
