"""A ChatGPT data export: the branch ChatGPT showed becomes the shown branch, the others
versions; what it does not show as chat text is left out and counted; a broken tree is refused."""

from __future__ import annotations

import copy
import json

import pytest

from engine.chat.store import ConversationStore
from engine.chat.transfer import (
    TransferError,
    add_to_store,
    parse_chat_file,
    parse_chatgpt_json,
)
from engine.chat.transfer.markdown import shown_branch

from .chatgpt_export import T0, conversation, message, node


def _parse(*chats):
    return parse_chatgpt_json(json.dumps(list(chats)).encode())


def test_the_shown_branch_is_the_one_chatgpt_showed():
    (record,) = _parse(conversation()).records
    assert [(m.role, m.content) for m in shown_branch(record)] == [
        ("user", "Where to in May?"),
        ("assistant", "Lisbon."),
        ("user", "Like this?"),
        ("assistant", "Let me check.\n\nYes, Lisbon in May."),  # two pieces around a tool call
    ]
    assert record.conversation.title == "Trip ideas"
    assert record.conversation.created_at == T0
    assert record.conversation.updated_at == T0 + 10
    assert shown_branch(record)[1].model == "gpt-4o"
    assert shown_branch(record)[1].created_at == T0 + 2


def test_other_branches_are_kept_as_versions():
    imported = _parse(conversation())
    store = ConversationStore.open(":memory:")
    (chat_id,) = add_to_store(store, imported).added
    shown = store.branch_with_versions(chat_id)
    assert [(which, count) for _m, which, count in shown] == [(1, 2), (1, 2), (1, 1), (1, 1)]
    first_reply = shown[1][0]
    versions = [store.message(i).content for i in store.siblings(first_reply.id)]
    assert versions == ["Lisbon.", "Porto."]
    questions = [store.message(i).content for i in store.siblings(shown[0][0].id)]
    assert questions == ["Where to in May?", "Where to in April?"]


def test_another_current_node_shows_its_branch():
    (record,) = _parse(conversation(current="a1b")).records
    assert [m.content for m in shown_branch(record)] == ["Where to in May?", "Porto."]


def test_what_is_left_out_is_counted_in_notes():
    imported = _parse(conversation())
    assert imported.source == "ChatGPT"
    assert any("1 image(s) were left out" in note for note in imported.notes)
    # the reasoning, the tool call and the tool's result (not ChatGPT's hidden system message)
    assert any(note.startswith("3 part(s) ChatGPT does not show") for note in imported.notes)


def test_a_visible_system_message_is_the_system_prompt():
    chat = conversation()
    chat["mapping"]["sys"]["message"] = message("system", "Answer in French.")
    (record,) = _parse(chat).records
    assert record.conversation.system_prompt == "Answer in French."


def test_a_chat_without_text_is_left_out_and_a_missing_title_made_from_the_question():
    empty = {"title": "Nothing", "mapping": {"root": node("root", None)}, "current_node": "root"}
    untitled = conversation(title=None)
    imported = _parse(empty, untitled)
    assert [r.conversation.title for r in imported.records] == ["Where to in May?"]
    assert "1 chat(s) with no text were left out." in imported.notes


def test_an_empty_export_and_the_format_is_detected():
    assert parse_chat_file(b"[]").records == ()
    assert parse_chat_file(json.dumps([conversation()]).encode()).source == "ChatGPT"


def _broken(change) -> dict:
    chat = copy.deepcopy(conversation())
    change(chat["mapping"])
    return chat


@pytest.mark.parametrize(
    "chat, reason",
    [
        ("text", "chat 2 should be an object, not text"),
        ({"mapping": []}, "“mapping” should be an object"),
        (_broken(lambda m: m["q1"].update(parent="nowhere")), "names a parent that is not"),
        (_broken(lambda m: m["q1"].update(parent=5)), "names a parent that is not"),
        (_broken(lambda m: m["root"].update(parent="a3")), "form a loop"),
        (_broken(lambda m: m["q2"].update(parent="q2")), "form a loop"),
        (_broken(lambda m: m.update(x=[])), "node 'x' should be an object"),
        (_broken(lambda m: m["q1"]["message"].update(content="hi")), "“content” should be"),
        (
            _broken(lambda m: m["q1"]["message"]["content"].update(parts="hi")),
            "“content.parts” should be a list",
        ),
        (
            _broken(lambda m: m["q1"]["message"]["content"].update(parts=[5])),
            "a part of “content.parts” is a number",
        ),
        (
            _broken(lambda m: m["q1"]["message"].update(create_time="May")),
            "seconds since 1970",
        ),
    ],
)
def test_a_broken_export_is_refused_with_the_reason(chat, reason):
    with pytest.raises(TransferError, match=reason):
        _parse(conversation(), chat)


def test_not_a_chatgpt_export_is_refused():
    with pytest.raises(TransferError, match="neither a Hearth chat file nor a ChatGPT"):
        parse_chat_file(b'[{"title": "x"}]')
    with pytest.raises(TransferError, match="not a ChatGPT export"):
        parse_chatgpt_json(b"{}")


def test_a_long_chain_of_nodes_is_walked_without_recursion():
    # 3,000 nodes deep: a recursive walk would pass Python's recursion limit (1,000)
    nodes = {"n0": node("n0", None, message("user", "q0", t=1))}
    for i in range(1, 3_000):
        role = "assistant" if i % 2 else "user"
        nodes[f"n{i}"] = node(f"n{i}", f"n{i - 1}", message(role, f"t{i}", t=i + 1))
    chat = {"title": "Long", "mapping": nodes, "current_node": "n2999"}
    (record,) = _parse(chat).records
    assert len(shown_branch(record)) == 3_000
