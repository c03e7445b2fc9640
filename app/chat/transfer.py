"""Exporting and importing chats in the window: File › Import chats…, Export chat…, Export all
chats…, and Export… on a chat in the list.

Reading and checking a file runs off the GUI thread with a progress dialog (a ChatGPT export
can be hundreds of MB), which can cancel it; the chats are then added to the store in one
transaction on the GUI thread, so a refused or cancelled import changes nothing. What happened
is said in the chat page's banner: how many chats came in and what was left out, or why the
file was refused.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QFileDialog, QProgressDialog, QWidget

from app.common import banner as b
from app.common.background import TaskRunner
from engine.chat.store import ConversationStore
from engine.chat.transfer import (
    ImportedChats,
    TransferError,
    add_to_store,
    chats_markdown,
    export_records,
    hearth_json,
    read_chat_import,
)

MARKDOWN_FILTER = "Markdown (*.md)"
JSON_FILTER = "Hearth chats (*.json)"
IMPORT_FILTER = "Chats (*.json *.zip);;Hearth chats (*.json);;ChatGPT export (*.zip *.json)"
PROGRESS_DELAY_MS = 400  # a small file is read before the dialog would flash up


class ImportCancelled(Exception):
    """The person pressed Cancel while the file was being read."""


class _Progress(QObject):
    """Carries a worker thread's progress to the dialog: `moved` is emitted on the worker's
    thread and, as this object lives on the GUI thread, queued to `show` there."""

    moved = Signal(int, int)

    def __init__(self, dialog: QProgressDialog, name: str):
        super().__init__(dialog)
        self._dialog, self._name = dialog, name
        self.moved.connect(self.show)

    @Slot(int, int)
    def show(self, done: int, total: int) -> None:
        if done <= self._dialog.value():
            return  # a later count came first: setValue below handles events of a modal dialog
        self._dialog.setLabelText(f"Reading {self._name}: chat {done:,} of {total:,}…")
        self._dialog.setMaximum(total)
        self._dialog.setValue(done)


def export_text(path: Path, records) -> str:
    """The file's text for `records`: Markdown for a .md path, else Hearth's JSON."""
    return chats_markdown(records) if path.suffix.lower() == ".md" else hearth_json(records)


def suggested_name(title: str) -> str:
    """A file name from a chat's title, without characters file systems refuse."""
    name = "".join(c for c in title if c.isalnum() or c in " -_").strip()
    return name[:60] or "chat"


class ChatTransfer(QObject):
    imported = Signal(tuple)  # the new conversations' ids

    def __init__(self, store: ConversationStore, window: QWidget, banner: b.Banner):
        super().__init__(window)
        self._store = store
        self._window = window
        self._banner = banner
        self._tasks = TaskRunner(self)
        self._progress: QProgressDialog | None = None
        self._cancel = threading.Event()
        self.last_folder = str(Path.home())

    # -- export ---------------------------------------------------------------------------------

    def export_dialog(self, conversation_ids: list[int] | None = None) -> None:
        """Ask where to save the chats named (all when None), then save them."""
        if conversation_ids == [] or (conversation_ids is None and not self._store.conversations()):
            self._banner.show_message(
                b.INFO, "Nothing to export yet", "Send a message first: a chat is kept once it "
                "has one.",
            )  # fmt: skip
            return
        if conversation_ids is not None and len(conversation_ids) == 1:
            name = suggested_name(self._store.conversation(conversation_ids[0]).title)
        else:
            name = "Hearth chats"
        path, chosen = QFileDialog.getSaveFileName(
            self._window,
            "Export chat" if conversation_ids and len(conversation_ids) == 1 else "Export chats",
            str(Path(self.last_folder) / f"{name}.md"),
            f"{MARKDOWN_FILTER};;{JSON_FILTER}",
        )
        if path:
            path = Path(path)
            if not path.suffix:
                path = path.with_suffix(".json" if chosen == JSON_FILTER else ".md")
            self.export_to(path, conversation_ids)

    def export_to(self, path: str | Path, conversation_ids: list[int] | None = None) -> bool:
        """Write the chats to `path` (Markdown for .md, else Hearth's JSON); True when written."""
        path = Path(path)
        records = export_records(self._store, conversation_ids)
        try:
            _write_atomic(path, export_text(path, records))
        except OSError as exc:
            self._banner.show_message(
                b.ERROR,
                f"Could not export to {path.name}",
                f"{exc.strerror or exc}. Choose another folder, or free some disk space.",
            )
            return False
        self.last_folder = str(path.parent)
        n = len(records)
        what = "Markdown (the shown versions)" if path.suffix.lower() == ".md" else "Hearth's JSON"
        self._banner.show_message(
            b.INFO,
            f"Exported {n:,} chat{'s' if n != 1 else ''}",
            f"Saved to {path} as {what}.",
        )
        return True

    # -- import ---------------------------------------------------------------------------------

    def import_dialog(self) -> None:
        path, _chosen = QFileDialog.getOpenFileName(
            self._window, "Import chats", self.last_folder, IMPORT_FILTER
        )
        if path:
            self.import_from(path)

    def import_from(self, path: str | Path) -> None:
        """Read `path` off the GUI thread, then add its chats (see `imported`)."""
        path = Path(path)
        if self.busy:
            self._banner.show_message(
                b.INFO, f"{path.name} was not imported", "Another import is still running: "
                "import it again once that one has finished.",
            )  # fmt: skip
            return
        self.last_folder = str(path.parent)
        self._cancel.clear()
        dialog = QProgressDialog(f"Reading {path.name}…", "Cancel", 0, 0, self._window)
        dialog.setObjectName("importProgress")
        dialog.setAccessibleName("Import progress")
        dialog.setWindowTitle("Importing chats")
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setMinimumDuration(PROGRESS_DELAY_MS)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        dialog.canceled.connect(self._cancel.set)
        progress = _Progress(dialog, path.name)
        self._progress = dialog

        def read() -> ImportedChats:
            return read_chat_import(path, progress=self._reporter(progress))

        self._tasks.run(read, lambda result: self._on_read(path, result))

    @property
    def busy(self) -> bool:
        return self._tasks.busy

    def _reporter(self, progress: _Progress) -> Callable[[int, int], None]:
        def report(done: int, total: int) -> None:
            if self._cancel.is_set():
                raise ImportCancelled
            progress.moved.emit(done, total)

        return report

    def _on_read(self, path: Path, result: ImportedChats | Exception) -> None:
        if self._progress is not None:
            self._progress.close()
            self._progress.deleteLater()
            self._progress = None
        if isinstance(result, ImportCancelled):
            self._banner.show_message(b.INFO, "Import cancelled", "Nothing was imported.")
            return
        if isinstance(result, TransferError):
            self._refused(path, str(result))
            return
        if isinstance(result, MemoryError):
            self._refused(path, f"{path.name} is too large to read in this computer's memory.")
            return
        if isinstance(result, Exception):
            self._refused(path, f"Reading it failed unexpectedly ({result!r}).")
            return
        try:
            outcome = add_to_store(self._store, result)
        except (sqlite3.Error, ValueError) as exc:
            self._refused(path, f"The chat history could not take its chats ({exc}).")
            return
        self._banner.show_message(
            b.INFO, f"Imported chats from {path.name}", outcome.summary(result.source)
        )
        self.imported.emit(outcome.added)

    def _refused(self, path: Path, reason: str) -> None:
        self._banner.show_message(
            b.ERROR, f"Could not import {path.name}", f"{reason} Nothing was imported."
        )


def _write_atomic(path: Path, text: str) -> None:
    """Write beside, then rename over: an export that fails leaves no half file behind."""
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
