"""Part of a reply's text can be selected with the mouse and copied; the selectable copy sits
exactly over the painted text, and right-click offers "Copy selected text"."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest

from tests.app.chat.test_actions import _load, _say

REPLY = "The quick brown fox jumps over the lazy dog."


def _hover_text(qtbot, chat, row):
    index = chat.model.index(row)
    text = chat.delegate.text_rect(index, chat.transcript.visualRect(index), chat.transcript.font())
    QTest.mouseMove(chat.transcript.viewport(), text.center())
    qtbot.waitUntil(lambda: chat.delegate.selectable.editor() is not None, timeout=2000)
    return text


def test_dragging_over_a_reply_selects_part_of_it_and_ctrl_c_copies_it(
    qtbot, bridge, chat, tmp_path
):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Say a pangram", REPLY)
    text_rect = _hover_text(qtbot, chat, 1)
    editor = chat.delegate.selectable.editor()
    assert editor.toPlainText() == REPLY
    assert editor.geometry() == text_rect  # laid exactly over the painted text
    assert chat.delegate.selectable.row == 1

    # Drag from the start of "quick" to the end of "fox", as a person would.
    cursor = editor.document().find("quick")
    start = editor.cursorRect(_at(editor, cursor.selectionStart())).center()
    end = editor.cursorRect(_at(editor, editor.document().find("fox").selectionEnd())).center()
    viewport = editor.viewport()
    QTest.mousePress(viewport, Qt.MouseButton.LeftButton, pos=start)
    QTest.mouseMove(viewport, (start + end) / 2)
    QTest.mouseMove(viewport, end)
    QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=end)
    assert editor.selected_text() == "quick brown fox"

    QGuiApplication.clipboard().clear()
    QTest.keyClick(editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "quick brown fox"


def test_the_context_menu_offers_the_selection(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Say a pangram", REPLY)
    menu = chat.context_menu(1, selected="brown fox")
    actions = [a.text() for a in menu.actions()]
    assert actions[:2] == ["Copy selected text", "Copy message"]
    QGuiApplication.clipboard().clear()
    menu.actions()[0].trigger()
    assert QGuiApplication.clipboard().text() == "brown fox"
    assert "Copy selected text" not in [a.text() for a in chat.context_menu(1).actions()]


def test_only_one_message_at_a_time_and_never_a_streaming_one(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Say a pangram", REPLY)
    _hover_text(qtbot, chat, 0)
    assert chat.delegate.selectable.row == 0
    _hover_text(qtbot, chat, 1)
    assert chat.delegate.selectable.row == 1
    assert chat.transcript.isPersistentEditorOpen(chat.model.index(1))
    assert not chat.transcript.isPersistentEditorOpen(chat.model.index(0))

    _say(qtbot, chat, client, "Another", "Streaming…", finish=False)
    index = chat.model.index(3)
    rect = chat.delegate.text_rect(index, chat.transcript.visualRect(index), chat.transcript.font())
    QTest.mouseMove(chat.transcript.viewport(), rect.center())
    qtbot.wait(50)
    assert chat.delegate.selectable.row != 3


def _at(editor, position: int):
    cursor = editor.textCursor()
    cursor.setPosition(position)
    return cursor
