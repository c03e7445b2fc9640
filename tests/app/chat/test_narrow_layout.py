"""The chat list gives way to a narrow page or the settings, and the header's Chats button
brings it back; the window fits its screen and has a minimum size."""

from __future__ import annotations

from PySide6.QtCore import Qt


def test_a_narrow_page_hides_the_chat_list_and_the_button_brings_it_back(qtbot, chat):
    chat.resize(560, 600)
    qtbot.waitUntil(lambda: not chat.sidebar.isVisible(), timeout=2000)
    button = chat.header.chats_button
    assert button.isVisible() and not button.isChecked()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert chat.sidebar.isVisible() and button.isChecked()
    chat.resize(1200, 600)
    qtbot.waitUntil(lambda: not button.isVisible(), timeout=2000)
    assert chat.sidebar.isVisible()


def test_the_chat_list_comes_back_in_place_of_the_settings(qtbot, chat):
    chat.resize(900, 600)
    chat.header.settings_button.setChecked(True)
    assert not chat.sidebar.isVisible() and chat.header.chats_button.isVisible()
    qtbot.mouseClick(chat.header.chats_button, Qt.MouseButton.LeftButton)
    assert chat.sidebar.isVisible() and not chat.settings_drawer.isVisible()
    assert not chat.header.settings_button.isChecked()


def test_the_window_fits_its_screen_and_has_a_minimum(qtbot, bridge, tmp_path):
    from app.shell.gui_main import window_size
    from tests.app.conftest import make_window

    window = make_window(qtbot, bridge, tmp_path)
    assert window.minimumSize().width() >= 640 and window.minimumSize().height() >= 400
    room = window.screen().availableGeometry().size()
    size = window_size(window)
    assert size.width() <= max(room.width() * 0.9, window.minimumWidth())
    assert size.height() <= max(room.height() * 0.9, window.minimumHeight())
