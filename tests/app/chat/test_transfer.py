"""Exporting and importing chats in the window: the file dialogs, the progress dialog, the
banner that says what happened, and the chat list and transcript after an import."""

from __future__ import annotations

import json
import threading

from PySide6.QtWidgets import QFileDialog, QPushButton

from app.chat.transfer import suggested_name
from engine.chat.store import ConversationStore
from tests.app.conftest import WAIT_MS
from tests.engine.chat.transfer.chatgpt_export import conversation
from tests.engine.chat.transfer.conftest import fill


def _wait_import(qtbot, chat) -> None:
    qtbot.waitUntil(lambda: not chat.transfer.busy, timeout=WAIT_MS)


def test_a_chat_exported_from_the_sidebar_and_imported_is_the_same_chat(
    qtbot, chat, store, tmp_path, monkeypatch
):
    chat_id = fill(store)
    chat.sidebar.refresh()
    target = tmp_path / "Trip ideas.json"
    asked = []

    def save_dialog(_parent, title, suggested, filters):
        asked.append((title, suggested, filters))
        return str(target), "Hearth chats (*.json)"

    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_dialog)
    chat.sidebar.export_requested.emit(chat_id)
    assert asked[0][0] == "Export chat" and asked[0][1].endswith("Trip ideas.md")
    assert chat.notice.title() == "Exported 1 chat"
    assert json.loads(target.read_text())["conversations"][0]["title"] == "Trip ideas"

    other = ConversationStore.open(tmp_path / "other.sqlite3")
    from app.chat.view import ChatView

    second = ChatView(chat._bridge, store=other)
    qtbot.addWidget(second)
    second.transfer.import_from(target)
    _wait_import(qtbot, second)
    assert second.notice.title() == "Imported chats from Trip ideas.json"
    assert second.notice.text() == "Imported 1 chat from Hearth."
    assert second.sidebar.titles() == ["Trip ideas"]
    assert second.header.title.text() == "Trip ideas"  # the imported chat is opened
    shown = [(e.role, e.text, e.author, e.footer, e.branches) for e in second.model.entries()]
    chat.open_conversation(chat_id)
    original = [(e.role, e.text, e.author, e.footer, e.branches) for e in chat.model.entries()]
    assert shown == original and len(shown) == 4
    other.close()


def test_all_chats_export_to_markdown_with_the_suffix_from_the_filter(
    qtbot, chat, store, tmp_path, monkeypatch
):
    fill(store)
    store.create_conversation("Second")
    monkeypatch.setattr(
        QFileDialog,
        "getSaveFileName",
        lambda *_a: (str(tmp_path / "all"), "Markdown (*.md)"),
    )
    chat.transfer.export_dialog()
    text = (tmp_path / "all.md").read_text()
    assert text.startswith("# Second") and "# Trip ideas" in text
    assert "## tiny (version 1 of 2)" in text
    assert chat.notice.title() == "Exported 2 chats"


def test_export_of_a_new_chat_says_there_is_nothing_yet(chat, monkeypatch):
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_a: ("", ""))
    chat.export_current_chat()
    assert chat.notice.title() == "Nothing to export yet"


def test_an_export_that_cannot_be_written_says_so(chat, store, tmp_path):
    fill(store)
    assert not chat.transfer.export_to(tmp_path / "missing-folder" / "x.json")
    assert chat.notice.title() == "Could not export to x.json"
    assert not (tmp_path / "missing-folder").exists()


def test_a_chatgpt_export_is_imported_through_the_file_dialog(
    qtbot, chat, store, tmp_path, monkeypatch
):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conversation(), conversation(title="Second")]))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a: (str(path), ""))
    chat.transfer.import_dialog()
    _wait_import(qtbot, chat)
    assert chat.notice.title() == "Imported chats from conversations.json"
    assert chat.notice.text().startswith("Imported 2 chats from ChatGPT. ")
    assert "image(s) were left out" in chat.notice.text()
    assert sorted(chat.sidebar.titles()) == ["Second", "Trip ideas"]
    assert chat.model.entries()[-1].text == "Let me check.\n\nYes, Lisbon in May."
    assert chat.model.entries()[1].author == "gpt-4o"


def test_a_hostile_file_is_refused_in_the_banner_and_changes_nothing(qtbot, chat, store, tmp_path):
    fill(store)
    before = [c.title for c in store.conversations()]
    path = tmp_path / "deep.json"
    path.write_text("[" * 50_000)
    chat.transfer.import_from(path)
    _wait_import(qtbot, chat)
    assert chat.notice.title() == "Could not import deep.json"
    assert chat.notice.text() == (
        "deep.json is nested too deeply to be a chat file. Nothing was imported."
    )
    assert [c.title for c in store.conversations()] == before


def test_a_cancelled_import_changes_nothing(qtbot, chat, store, tmp_path, monkeypatch):
    from app.chat import transfer

    release = threading.Event()

    def read(path, progress):  # stands where read_chat_import reads the file
        release.wait(WAIT_MS / 1000)
        progress(1, 3)  # Cancel was pressed: this raises
        raise AssertionError("the import went on after Cancel")

    monkeypatch.setattr(transfer, "read_chat_import", read)
    chat.transfer.import_from(tmp_path / "conversations.json")
    chat.transfer._progress.findChild(QPushButton).click()  # Cancel
    chat.transfer.import_from(tmp_path / "second.json")  # while the first is still running
    assert chat.notice.title() == "second.json was not imported"
    release.set()
    _wait_import(qtbot, chat)
    assert chat.notice.title() == "Import cancelled"
    assert store.conversations() == []


def test_the_progress_dialog_counts_the_chats(qtbot, chat, tmp_path, monkeypatch):
    from app.chat import transfer

    monkeypatch.setattr(transfer, "PROGRESS_DELAY_MS", 0)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conversation()] * 3))
    seen = []
    original = transfer._Progress.show

    def show(self, done, total):
        original(self, done, total)
        seen.append((self._dialog.labelText(), self._dialog.accessibleName()))

    monkeypatch.setattr(transfer._Progress, "show", show)
    chat.transfer.import_from(path)
    _wait_import(qtbot, chat)
    qtbot.waitUntil(lambda: any("3 of 3" in label for label, _name in seen), timeout=WAIT_MS)
    assert ("Reading conversations.json: chat 3 of 3…", "Import progress") in seen


def test_file_names_are_made_from_titles():
    assert suggested_name("Trip: ideas / May?") == "Trip ideas  May"
    assert suggested_name("???") == "chat"


def test_the_file_menu_imports_and_exports_chats(qtbot, bridge, store, tmp_path, monkeypatch):
    from app.chat.view import ChatView
    from app.shell.main_window import MainWindow
    from app.shell.pages import CHAT, PageSpec

    # the chat page over this test's own store, not the session's shared data folder
    window = MainWindow(bridge, pages=[PageSpec(CHAT, lambda w: ChatView(w.bridge, store=store))])
    qtbot.addWidget(window)
    file_menu = window.menuBar().actions()[0].menu()
    actions = {a.text(): a for a in file_menu.actions()}
    assert {"&Import chats…", "&Export this chat…", "Export &all chats…"} <= set(actions)
    actions["&Export this chat…"].trigger()
    assert window.chat_view.notice.title() == "Nothing to export yet"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conversation()]))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a: (str(path), ""))
    actions["&Import chats…"].trigger()
    _wait_import(qtbot, window.chat_view)
    assert window.chat_view.sidebar.titles() == ["Trip ideas"]
