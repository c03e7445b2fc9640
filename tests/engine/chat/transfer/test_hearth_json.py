"""Hearth's chat file: export then import gives the same chats; a file that is not one is
refused with the reason, and nothing is written."""

from __future__ import annotations

import base64
import json

import pytest

from engine.chat.store import ConversationStore
from engine.chat.transfer import (
    FORMAT,
    VERSION,
    TransferError,
    add_to_store,
    export_records,
    hearth_json,
    parse_chat_file,
    parse_hearth_json,
)


def _exported(store) -> str:
    return hearth_json(export_records(store), exported_at=1.0)


def test_export_then_import_gives_the_same_chats(store, filled):
    store.create_conversation("Empty chat")
    text = _exported(store)
    other = ConversationStore.open(":memory:")
    outcome = add_to_store(other, parse_hearth_json(text.encode()))
    assert len(outcome.added) == 2 and outcome.already_here == 0 and not outcome.notes
    assert _exported(other) == text  # every field, every branch, the shown one
    imported = other.conversation(outcome.added[1])
    original = store.conversation(filled)
    assert [m.content for m in other.branch(imported.id)] == [
        m.content for m in store.branch(original.id)
    ]
    assert other.branch_with_versions(imported.id)[1][1:] == (1, 2)  # Lisbon, 1 of 2
    assert imported.created_at == original.created_at
    assert other.message(other.branch(imported.id)[1].id).stats.tokens_per_second == 41.5


def test_importing_the_same_file_twice_adds_nothing_the_second_time(store, filled):
    data = _exported(store).encode()
    outcome = add_to_store(store, parse_hearth_json(data))
    assert outcome.added == () and outcome.already_here == 1
    assert "already here" in outcome.summary("Hearth")
    assert len(store.conversations()) == 1


def test_the_file_says_its_format_and_version_and_numbers_messages_from_one(store, filled):
    document = json.loads(_exported(store))
    assert (document["format"], document["version"]) == (FORMAT, VERSION)
    chat = document["conversations"][0]
    assert [m["id"] for m in chat["messages"]] == [1, 2, 3, 4, 5, 6]
    assert [m["parent"] for m in chat["messages"]] == [None, 1, 1, 2, 4, None]
    assert chat["active_leaf"] == 5
    assert chat["messages"][0]["attachments"] == []


def _file(**chat) -> bytes:
    base = {"title": "T", "messages": [{"id": 1, "role": "user", "content": "hi"}]}
    return json.dumps(
        {"format": FORMAT, "version": 1, "conversations": [{**base, **chat}]}
    ).encode()


def _message(**fields) -> bytes:
    return _file(messages=[{"id": 1, "role": "user", "content": "hi", **fields}])


def test_a_minimal_hand_written_file_is_read_with_defaults():
    imported = parse_hearth_json(_file())
    (record,) = imported.records
    assert record.conversation.title == "T"
    assert record.conversation.active_leaf_id == 1  # no "active_leaf": the last message
    assert record.messages[0].content == "hi" and record.messages[0].parent_id is None


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"format": "hearth.chats", "version": NaN}', "not valid JSON"),
        (b'{"format": "hearth.chats", "version": 1' + b"1" * 5000 + b"}", "not valid JSON"),
        (b"{}", "neither a Hearth chat file"),
        (b'{"format": "hearth.chats"}', "no valid version"),
        (b'{"format": "hearth.chats", "version": true}', "no valid version"),
        (b'{"format": "hearth.chats", "version": 2, "conversations": []}', "newer Hearth"),
        (b'{"format": "hearth.chats", "version": 1, "conversations": {}}', "should be a list"),
        (_file(title=5), "“title” should be text, not a number"),
        (_file(messages="hi"), "“messages” should be a list"),
        (_file(settings=[1]), "“settings” should be an object"),
        (_file(settings={"a": {"b": 1}}), "should be a number, short text"),
        (_file(settings={"a": 10**400}), "should be a number, short text"),
        (
            _file(settings={"temperature": "hot"}),
            "“settings.temperature” should be a number from 0",
        ),
        (_file(settings={"top_k": 2.5}), "“settings.top_k” should be a whole number from 0"),
        (_file(settings={"max_tokens": 0}), "“settings.max_tokens” should be a whole number"),
        (_file(settings={"system_prompt": 3}), "“settings.system_prompt” should be text"),
        (_file(created_at="yesterday"), "seconds since 1970"),
        (_file(created_at=-5), "seconds since 1970"),
        (_file(active_leaf=9), "“active_leaf” should be the id"),
        (_message(role="system"), "“role” should be"),
        (_message(id="1"), "“id” should be a whole number"),
        (_message(parent=1), "“parent” should be null or the id of a message before it"),
        (_message(content=None), "“content” should be text, not null"),
        (_message(content="x" * 4_000_001), "more than the 4,000,000"),
        (_message(partial="yes"), "“partial” should be true or false"),
        (_message(stats={"n_generated": 1.5}), "stats.n_generated"),
        (_message(stats={"tokens_per_second": -1}), "stats.tokens_per_second"),
        (_message(attachments={}), "“attachments” should be a list"),
        (_message(attachments=[{"kind": "script", "mime_type": "text/x-sh"}]), "an image"),
        (
            _message(attachments=[{"kind": "image", "mime_type": "image/png", "data": "@@"}]),
            "not valid base64",
        ),
    ],
)
def test_a_malformed_file_is_refused_with_the_reason(data, reason):
    with pytest.raises(TransferError, match=reason):
        parse_chat_file(data, name="chats.json")


def test_two_messages_with_the_same_id_are_refused():
    data = _file(messages=[{"id": 1, "role": "user", "content": "a"}] * 2)
    with pytest.raises(TransferError, match="chat 1, message 2: “id”"):
        parse_hearth_json(data)


def test_a_refused_file_changes_nothing_in_the_store(store, filled):
    good = json.loads(_exported(store))["conversations"][0]
    bad = {**good, "title": 7}
    data = json.dumps({"format": FORMAT, "version": 1, "conversations": [good, bad]}).encode()
    before = _exported(store)
    with pytest.raises(TransferError, match="chat 2"):
        add_to_store(store, parse_hearth_json(data))
    assert _exported(store) == before


def test_a_failing_insert_rolls_back_every_chat(store, filled):
    imported = parse_hearth_json(_exported(store).encode())
    record = imported.records[0]
    fresh = ConversationStore.open(":memory:")
    broken = (record.conversation, (record.messages[1],))  # its parent is not in the list
    with pytest.raises(ValueError, match="does not come before it"):
        fresh.insert_conversations([(record.conversation, record.messages), broken])
    assert fresh.conversations() == []


def test_control_characters_are_removed_and_titles_kept_on_one_line():
    data = _file(
        title="Evil\u202etitle\nsecond line\x1b[2J",
        messages=[{"id": 1, "role": "user", "content": "a\x1b[31mred\x00\r\nb \ud800"}],
    )
    (record,) = parse_hearth_json(data).records
    assert record.conversation.title == "Eviltitle second line[2J"
    assert record.messages[0].content == "a[31mred\nb \ufffd"


def test_images_travel_with_their_messages_through_export_and_import(store):
    from engine.chat.store import Attachment
    from testkit.tiny_vision import tiny_png

    cat = Attachment("image", "image/png", "cat.png", tiny_png(5, 4))
    chat = store.create_conversation("Pets")
    asked = store.add_message(chat.id, "user", "What is it?", attachments=[cat, cat])
    store.add_message(chat.id, "assistant", "A cat.", parent_id=asked)
    text = _exported(store)
    image = json.loads(text)["conversations"][0]["messages"][0]["attachments"][0]
    assert base64.b64decode(image["data"]) == cat.data and image["name"] == "cat.png"
    other = ConversationStore.open(":memory:")
    outcome = add_to_store(other, parse_hearth_json(text.encode()))
    assert not outcome.notes
    first = other.branch(outcome.added[0])[0]
    assert other.attachments(first.id) == (cat, cat)
    assert _exported(other) == text


def test_progress_is_reported_for_each_chat():
    chats = [{"title": str(i), "messages": []} for i in range(3)]
    data = json.dumps({"format": FORMAT, "version": 1, "conversations": chats}).encode()
    seen = []
    parse_hearth_json(data, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_a_chat_with_a_tool_call_goes_out_and_comes_back(store):
    chat = store.create_conversation("Sums", settings={"tools_off": "calc__hang,calc__fail"})
    question = store.add_message(chat.id, "user", "2 + 3.5?")
    reply = store.add_message(chat.id, "assistant", "", parent_id=question, model="m.gguf")
    record = {"call_id": "call_1", "name": "calc__add", "arguments": {"a": 2}, "state": "done"}
    store.add_message(chat.id, "tool", json.dumps(record), parent_id=reply)
    text = _exported(store)
    other = ConversationStore.open(":memory:")
    outcome = add_to_store(other, parse_hearth_json(text.encode()))
    assert _exported(other) == text
    assert [m.role for m in other.branch(outcome.added[0])] == ["user", "assistant", "tool"]
