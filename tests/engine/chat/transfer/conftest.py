"""Fixtures of the chat transfer tests: a store with a conversation that has every kind of
thing a chat file must carry (branches, a failed and a partial reply, stats, settings)."""

from __future__ import annotations

import pytest

from engine.chat.store import ConversationStore, MessageStats


@pytest.fixture
def store():
    s = ConversationStore.open(":memory:")
    yield s
    s.close()


def fill(store: ConversationStore) -> int:
    """A chat with two versions of the first reply, an edited question, and stats; its id."""
    chat = store.create_conversation(
        "Trip ideas", system_prompt="Be brief.", settings={"temperature": 0.7, "seed": -1}
    )
    q = store.add_message(chat.id, "user", "Where to in May?\n```\ncode\n```")
    first = store.add_message(chat.id, "assistant", "Lisbon.", parent_id=q, model="/m/tiny.gguf")
    stats = MessageStats(12, 3, 41.5, 0.12, 0.05, 0.07)
    store.finish_message(first, "Lisbon.", stats=stats, stop_reason="eos")
    second = store.add_message(chat.id, "assistant", "", parent_id=q, partial=True)
    store.update_partial(second, "Por")
    q2 = store.add_message(chat.id, "user", "And in June? ☀️ ‮", parent_id=first)
    failed = store.add_message(chat.id, "assistant", "", parent_id=q2, model="/m/tiny.gguf")
    store.finish_message(failed, "", failed=True, stop_reason="The engine stopped.")
    store.add_message(chat.id, "user", "Where to in April?")  # an edit of the first question
    store.set_active_leaf(chat.id, failed)
    return chat.id


@pytest.fixture
def filled(store):
    return fill(store)
