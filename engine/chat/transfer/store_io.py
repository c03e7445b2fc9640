"""Between the conversation store and ChatRecords: the records to export, and adding imported
ones (skipping the chats the store already has, so importing a file twice adds nothing)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.chat.store import ConversationStore
from engine.chat.transfer.records import ChatRecord, ImportedChats


@dataclass(frozen=True)
class ImportOutcome:
    added: tuple[int, ...]  # the new conversations' ids, in the file's order
    already_here: int  # chats skipped: the store has one of the same title and start time
    notes: tuple[str, ...]  # what the file held that was left out

    def summary(self, source: str) -> str:
        """One paragraph for the person: what was imported, and what was not."""
        n = len(self.added)
        parts = [f"Imported {n:,} chat{'s' if n != 1 else ''} from {source}."]
        if self.already_here:
            parts.append(f"{self.already_here:,} were already here and were skipped.")
        return " ".join([*parts, *self.notes])


def export_records(
    store: ConversationStore, conversation_ids: Iterable[int] | None = None
) -> list[ChatRecord]:
    """Every conversation (most recent first), or those named, with all their messages."""
    if conversation_ids is None:
        conversation_ids = [c.id for c in store.conversations()]
    return [
        ChatRecord(store.conversation(i), tuple(store.messages(i)), store.attachments_by_message(i))
        for i in conversation_ids
    ]


def add_to_store(store: ConversationStore, imported: ImportedChats) -> ImportOutcome:
    """Add the imported chats in one transaction (all of them, or on an error none)."""
    have = {(c.title, c.created_at) for c in store.conversations()}
    new = []
    for record in imported.records:
        key = (record.conversation.title, record.conversation.created_at)
        if record.conversation.created_at > 0 and key in have:
            continue
        have.add(key)
        new.append((record.conversation, record.messages, record.attachments))
    added = store.insert_conversations(new) if new else []
    return ImportOutcome(tuple(added), len(imported.records) - len(new), imported.notes)
