"""The conversation store: round trips, branches, search, migrations, and a crash mid-reply."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from engine.chat.store import ConversationStore, MessageStats
from engine.chat.store_schema import SCHEMA_VERSION, NewerSchemaError, current_version, migrate


@pytest.fixture
def store(tmp_path):
    s = ConversationStore.open(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def test_a_new_file_is_at_the_current_schema_version_in_wal_mode(tmp_path):
    path = tmp_path / "c.sqlite3"
    ConversationStore.open(path).close()
    conn = sqlite3.connect(path)
    assert current_version(conn) == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrations_run_once_each_and_in_order(tmp_path):
    conn = sqlite3.connect(tmp_path / "m.sqlite3", isolation_level=None)
    steps = ("CREATE TABLE a (x INTEGER);", "ALTER TABLE a ADD COLUMN y TEXT;")
    assert migrate(conn, steps[:1]) == 1
    assert migrate(conn, steps) == 2
    assert migrate(conn, steps) == 2  # nothing runs twice
    assert [r[1] for r in conn.execute("PRAGMA table_info(a)")] == ["x", "y"]


def test_a_failing_migration_leaves_the_previous_version(tmp_path):
    conn = sqlite3.connect(tmp_path / "m.sqlite3", isolation_level=None)
    migrate(conn, ("CREATE TABLE a (x INTEGER);",))
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, ("CREATE TABLE a (x INTEGER);", "CREATE TABLE b (x); SELECT nope FROM a;"))
    assert not conn.in_transaction
    assert current_version(conn) == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'b'").fetchone() is None


def test_a_database_from_a_newer_hearth_is_refused_with_advice(tmp_path):
    conn = sqlite3.connect(tmp_path / "m.sqlite3", isolation_level=None)
    migrate(conn, ("SELECT 1;", "SELECT 1;"))
    with pytest.raises(NewerSchemaError, match="Update Hearth"):
        migrate(conn, ("SELECT 1;",))


def test_round_trip_keeps_every_field(tmp_path):
    path = tmp_path / "c.sqlite3"
    store = ConversationStore.open(path)
    chat = store.create_conversation("Trip", system_prompt="Be brief.", settings={"t": 0.2})
    user = store.add_message(chat.id, "user", "Where to in May?")
    reply = store.add_message(
        chat.id,
        "assistant",
        "",
        parent_id=user,
        model="qwen.gguf",
        settings={"top_k": 40},
        partial=True,
    )
    stats = MessageStats(30, 12, 41.5, 0.12, 0.1, 0.29)
    store.finish_message(reply, "Lisbon.", stats=stats, stop_reason="eos")
    store.close()

    again = ConversationStore.open(path)
    (chat2,) = again.conversations()
    assert (chat2.title, chat2.system_prompt, chat2.settings) == ("Trip", "Be brief.", {"t": 0.2})
    first, second = again.branch(chat2.id)
    assert (first.role, first.content, first.parent_id) == ("user", "Where to in May?", None)
    assert (second.content, second.model, second.settings) == (
        "Lisbon.",
        "qwen.gguf",
        {"top_k": 40},
    )
    assert (second.partial, second.failed, second.stop_reason) == (False, False, "eos")
    assert second.stats == stats
    again.close()


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("", ["Cooking", "Trip"]),
        ("trip", ["Trip"]),
        ("LISBON", ["Trip"]),  # message text, any case
        ("pasta", ["Cooking"]),
        ("100%", []),  # LIKE wildcards are literal
        ("_", []),
    ],
)
def test_search_matches_titles_and_message_text(store, query, found):
    trip = store.create_conversation("Trip")
    store.add_message(trip.id, "assistant", "Lisbon is lovely")
    cooking = store.create_conversation("Cooking")
    store.add_message(cooking.id, "user", "pasta for two")
    assert [c.title for c in store.conversations(query)] == found


def test_rename_system_prompt_and_delete(store):
    chat = store.create_conversation("New chat")
    store.add_message(chat.id, "user", "hi")
    store.rename(chat.id, "Greetings")
    store.set_system_prompt(chat.id, "You are terse.")
    assert store.conversation(chat.id).title == "Greetings"
    assert store.conversation(chat.id).system_prompt == "You are terse."
    store.delete_conversation(chat.id)
    assert store.conversations() == []
    assert store.messages(chat.id) == []  # messages go with it


def test_regenerate_and_edit_keep_the_old_branch(store):
    chat = store.create_conversation("c")
    u1 = store.add_message(chat.id, "user", "question")
    a1 = store.add_message(chat.id, "assistant", "first answer", parent_id=u1)
    a2 = store.add_message(chat.id, "assistant", "second answer", parent_id=u1)
    assert [m.content for m in store.branch(chat.id)] == ["question", "second answer"]
    assert store.siblings(a2) == [a1, a2]
    u2 = store.add_message(chat.id, "user", "question, edited")  # a new root: edit of u1
    assert [m.content for m in store.branch(chat.id)] == ["question, edited"]
    assert store.siblings(u2) == [u1, u2]
    store.set_active_leaf(chat.id, a1)
    assert [m.content for m in store.branch(chat.id)] == ["question", "first answer"]
    assert len(store.messages(chat.id)) == 4


def test_deleting_a_message_keeps_the_thread_joined(store):
    chat = store.create_conversation("c")
    u1 = store.add_message(chat.id, "user", "1")
    a1 = store.add_message(chat.id, "assistant", "2", parent_id=u1)
    u2 = store.add_message(chat.id, "user", "3", parent_id=a1)
    store.delete_message(a1)
    assert [m.content for m in store.branch(chat.id)] == ["1", "3"]
    store.delete_message(u2)  # the active leaf: its parent becomes the leaf
    assert [m.content for m in store.branch(chat.id)] == ["1"]


WRITER = textwrap.dedent(
    """
    import sys, time
    from engine.chat.store import ConversationStore
    store = ConversationStore.open(sys.argv[1])
    chat = store.create_conversation("crash")
    user = store.add_message(chat.id, "user", "tell me a story")
    reply = store.add_message(chat.id, "assistant", "", parent_id=user, partial=True)
    text = ""
    i = 0
    while True:
        i += 1
        text += f"word{i} "
        store.update_partial(reply, text)
        if i == 50:
            print("streaming", flush=True)
        time.sleep(0.002)
    """
)


def test_a_crash_mid_reply_leaves_the_partial_reply_on_disk_and_marked(tmp_path):
    path = tmp_path / "c.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "streaming"
        time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: no cleanup, no close, as in a crash
        proc.wait()
    store = ConversationStore.open(path)
    (chat,) = store.conversations()
    user, reply = store.branch(chat.id)
    assert reply.partial and not user.partial
    assert reply.content.startswith("word1 word2 ") and "word50 " in reply.content
    store.close()


def test_a_thousand_message_conversation_opens_quickly(store):
    """Opening it reads the conversation and its messages once each, not a query a message
    (counted, not timed: a clock on a shared CI machine measures the machine)."""
    chat = store.create_conversation("long")
    parent = None
    for i in range(1000):
        parent = store.add_message(
            chat.id, "user" if i % 2 == 0 else "assistant", f"message {i}", parent_id=parent
        )
    statements = []
    store._conn.set_trace_callback(statements.append)
    shown = store.branch_with_versions(chat.id)
    store._conn.set_trace_callback(None)
    assert len(shown) == 1000 and shown[-1][0].content == "message 999"
    assert all((which, count) == (1, 1) for _m, which, count in shown)
    assert len(statements) <= 2, statements


def test_versions_are_counted_among_siblings(store):
    chat = store.create_conversation("c")
    u = store.add_message(chat.id, "user", "q")
    store.add_message(chat.id, "assistant", "a1", parent_id=u)
    store.add_message(chat.id, "assistant", "a2", parent_id=u)
    assert [(m.content, w, n) for m, w, n in store.branch_with_versions(chat.id)] == [
        ("q", 1, 1),
        ("a2", 2, 2),
    ]


def test_a_version_one_database_is_migrated_and_keeps_its_chats(tmp_path):
    from engine.chat.store_schema import MIGRATIONS

    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:1])
    conn.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('kept', 0, 0)")
    conn.close()
    store = ConversationStore.open(path)
    assert [c.title for c in store.conversations()] == ["kept"]
    store.close()
    conn = sqlite3.connect(path)
    assert current_version(conn) == SCHEMA_VERSION == 3
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"messages_by_parent", "attachments_by_message"} <= names


def test_a_messages_images_are_kept_with_it_in_order_and_go_with_it(store):
    from engine.chat.store import Attachment
    from testkit.tiny_vision import tiny_png

    cat, dog = (Attachment("image", "image/png", n, tiny_png(4, 3, seed=i))
                for i, n in enumerate(("cat.png", "dog.png")))  # fmt: skip
    chat = store.create_conversation("Pets")
    first = store.add_message(chat.id, "user", "Which is it?", attachments=[cat, dog])
    reply = store.add_message(chat.id, "assistant", "A cat.", parent_id=first)
    assert store.attachments(first) == (cat, dog)
    assert store.attachments(reply) == ()
    assert store.attachments_by_message(chat.id) == {first: (cat, dog)}
    store.delete_conversation(chat.id)
    assert store.attachments(first) == ()
