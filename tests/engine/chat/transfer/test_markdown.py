"""Chats as Markdown: the shown branch, who wrote what, versions counted, interrupted and failed
replies said so."""

from __future__ import annotations

import pytest

from engine.chat.transfer import chat_markdown, chats_markdown, export_records
from engine.chat.transfer.markdown import model_label


def test_a_chat_reads_as_its_shown_branch(store, filled):
    (record,) = export_records(store, [filled])
    text = chat_markdown(record)
    assert text.startswith("# Trip ideas\n\n*")
    assert "**System prompt**\n\n> Be brief." in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## You (version 1 of 2)", "## tiny (version 1 of 2)", "## You", "## tiny"]
    assert "```\ncode\n```" in text  # message text is Markdown already: kept as it is
    assert "*The reply failed: The engine stopped..*" not in text
    assert "*The reply failed: The engine stopped.*" in text
    assert "Por" not in text  # another version: only in the JSON


def test_an_interrupted_reply_is_said_to_be(store):
    chat = store.create_conversation("Cut short")
    q = store.add_message(chat.id, "user", "Hi")
    store.add_message(chat.id, "assistant", "Hel", parent_id=q, partial=True)
    (record,) = export_records(store)
    assert chat_markdown(record).endswith("Hel\n\n*This reply was interrupted before it finished.*")


def test_all_chats_are_separated_by_rules(store, filled):
    store.create_conversation("Empty")
    text = chats_markdown(export_records(store))
    assert text.count("\n\n---\n\n") == 1 and text.startswith("# Empty")
    assert "0 messages*\n" in text


@pytest.mark.parametrize(
    "model, label",
    [("", "Assistant"), ("/m/Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q4_K_M"), ("gpt-4.5", "gpt-4.5")],
)
def test_a_reply_is_headed_with_its_models_name(model, label):
    assert model_label(model) == label


def test_a_tool_call_is_written_as_its_record_in_a_fence_it_cannot_close(store):
    chat = store.create_conversation("Sums")
    question = store.add_message(chat.id, "user", "2 + 3.5?")
    store.add_message(chat.id, "tool", '{"result": "``` not a fence end"}', parent_id=question)
    text = chat_markdown(export_records(store)[0])
    assert '## Tool call\n\n````json\n{"result": "``` not a fence end"}\n````' in text


def test_images_are_named_above_their_message(store):
    from engine.chat.store import Attachment

    chat = store.create_conversation("Pets")
    cat = Attachment("image", "image/png", "cat.png", b"\0" * 2048)
    store.add_message(chat.id, "user", "What is it?", attachments=[cat])
    (record,) = export_records(store)
    assert "## You\n\n*Image: cat.png (2 KB)*\n\nWhat is it?" in chat_markdown(record)
