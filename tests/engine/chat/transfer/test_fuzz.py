"""Any bytes, and any JSON, given to the chat importers: either chats that the store takes, or a
TransferError; never another exception, and never text the store cannot hold."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.chat.store import ConversationStore
from engine.chat.transfer import (
    FORMAT,
    TransferError,
    add_to_store,
    parse_chat_file,
)
from engine.chat.transfer.records import ChatRecord

from .chatgpt_export import conversation

EXAMPLES = 100
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)
field_names = st.sampled_from(
    ["id", "parent", "role", "content", "title", "messages", "settings", "stats", "active_leaf",
     "created_at", "attachments", "partial", "mapping", "message", "author", "parts",
     "current_node", "create_time", "content_type"]
)  # fmt: skip


def _mutate(value, path, new):
    """`value` with the item at `path` (keys or indices, as far as they go) replaced."""
    if not path or not isinstance(value, dict | list) or not value:
        return new
    key = path[0]
    if isinstance(value, dict):
        key = key if key in value else list(value)[_stable(key) % len(value)]
        return {**value, key: _mutate(value[key], path[1:], new)}
    index = _stable(key) % len(value)
    return [*value[:index], _mutate(value[index], path[1:], new), *value[index + 1 :]]


def _stable(key) -> int:
    return sum(map(ord, str(key)))  # not hash(): that changes from run to run


def _hearth_seed() -> dict:
    return {
        "format": FORMAT,
        "version": 1,
        "conversations": [
            {
                "title": "T",
                "settings": {"temperature": 0.5},
                "active_leaf": 2,
                "messages": [
                    {"id": 1, "parent": None, "role": "user", "content": "q"},
                    {"id": 2, "parent": 1, "role": "assistant", "content": "a", "stats": {}},
                ],
            }
        ],
    }


def _check(data: bytes) -> None:
    try:
        imported = parse_chat_file(data)
    except TransferError as exc:
        assert str(exc)
        return
    store = ConversationStore.open(":memory:")
    added = add_to_store(store, imported).added
    for record, chat_id in zip(imported.records, added, strict=False):
        _check_record(record)
        store.branch(chat_id)


def _check_record(record: ChatRecord) -> None:
    ids = set()
    for m in record.messages:
        assert m.parent_id is None or m.parent_id in ids
        ids.add(m.id)
        m.content.encode("utf-8")  # raises on a lone surrogate
        assert not any(ord(c) < 32 and c not in "\n\t" for c in m.content)


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes(data):
    _check(data)


@FUZZ
@given(st.lists(field_names | st.integers(0, 5), max_size=6), json_values)
def test_a_hearth_file_with_one_value_changed(path, new):
    _check(json.dumps(_mutate(_hearth_seed(), ["conversations", 0, *path], new)).encode())


@FUZZ
@given(st.lists(field_names | st.integers(0, 12), max_size=6), json_values)
def test_a_chatgpt_export_with_one_value_changed(path, new):
    _check(json.dumps([_mutate(conversation(), path, new)]).encode())
