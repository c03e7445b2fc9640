"""The conversation store's schema, as an ordered list of migrations.

`schema_version` holds one row: how many migrations have run. Opening a store runs the ones it has
not, each in its own transaction, so a database written by an older Hearth is brought up to date
and a crash half-way through a migration leaves the previous version intact. Migrations are only
ever appended; an applied one is never edited.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: conversations and messages. A message's parent_id makes the history a tree: editing a
    # user message and resending adds a sibling, and the old branch stays.
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL,
        system_prompt TEXT NOT NULL DEFAULT '',
        settings_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        active_leaf_id INTEGER
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        model TEXT NOT NULL DEFAULT '',
        settings_json TEXT NOT NULL DEFAULT '{}',
        partial INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        stop_reason TEXT NOT NULL DEFAULT '',
        n_prompt_tokens INTEGER,
        n_generated INTEGER,
        tokens_per_second REAL,
        time_to_first_token REAL,
        prefill_seconds REAL,
        decode_seconds REAL,
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    CREATE INDEX conversations_by_update ON conversations(updated_at DESC);
    """,
    # 2: finding a message's replies (versions, deleting, the newest branch) without a scan.
    """
    CREATE INDEX messages_by_parent ON messages(parent_id);
    """,
    # 3: files kept with a message (the images shown to a vision model), in their order.
    """
    CREATE TABLE attachments (
        id INTEGER PRIMARY KEY,
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        kind TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        data BLOB NOT NULL
    );
    CREATE INDEX attachments_by_message ON attachments(message_id, position);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


class NewerSchemaError(RuntimeError):
    """The database was written by a newer Hearth than this one."""


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: sqlite3.Connection, migrations: tuple[str, ...] = MIGRATIONS) -> int:
    """Run the migrations `conn` has not had; returns the version it ends at."""
    version = current_version(conn)
    if version > len(migrations):
        raise NewerSchemaError(
            f"This conversation database is version {version}, newer than this Hearth "
            f"understands ({len(migrations)}). Update Hearth, or move the file aside to start "
            "a fresh history."
        )
    for number in range(version, len(migrations)):
        # executescript commits first; the BEGIN makes the migration and its version atomic.
        try:
            conn.executescript(
                "BEGIN;\n"
                + migrations[number]
                + "\nDELETE FROM schema_version;"
                + f"\nINSERT INTO schema_version (version) VALUES ({number + 1});"
                + "\nCOMMIT;"
            )
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return len(migrations)
