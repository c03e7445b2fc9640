"""The chat window after a ChatGPT export was imported, with the File menu's import and export
entries open; and a preset chosen from the chat header, with its menu and the system prompt
library open. It always runs (pictures into a temporary folder); with HEARTH_SCREENSHOTS=1 it
rewrites docs/screenshots/chat-import.png and chat-presets.png. Under a real X server (Xvfb,
QT_QPA_PLATFORM=xcb) the screen is grabbed, so the open menus are in the picture; offscreen,
the window alone is."""

from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtCore import QPoint
from PySide6.QtGui import QGuiApplication, QPixmap
from PySide6.QtWidgets import QApplication

from app.chat.view import ChatView
from app.common.theme import apply_theme
from app.shell.main_window import MainWindow
from app.shell.pages import CHAT, PageSpec
from engine.chat.presets import ChatPreset, LoadSettings, PresetLibrary
from engine.chat.store import ConversationStore
from tests.app.conftest import WAIT_MS, load_fake_model, shown
from tests.engine.chat.transfer.chatgpt_export import conversation

DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


def _target(tmp_path: Path, name: str) -> Path:
    return DOCS / name if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / name


def _window(qtbot, bridge, tmp_path, library=None) -> MainWindow:
    apply_theme(QApplication.instance())
    store = ConversationStore.open(tmp_path / "chats.sqlite3")
    library = library or PresetLibrary(tmp_path / "presets.json")
    pages = [PageSpec(CHAT, lambda w: ChatView(w.bridge, store=store, presets=library, host=w))]
    return shown(qtbot, MainWindow(bridge, pages=pages), 1180, 720)


def _grab(window: MainWindow) -> QPixmap:
    if QGuiApplication.platformName() == "xcb":  # menus are windows of their own
        frame = window.frameGeometry()
        return window.screen().grabWindow(0, frame.x(), frame.y(), frame.width(), 560)
    return window.grab()


def test_import_screenshot(qtbot, bridge, tmp_path):
    window = _window(qtbot, bridge, tmp_path)
    chats = [
        conversation(),
        conversation(title="Sourdough schedule"),
        conversation(title="Explain KV caching"),
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chats))
    chat = window.chat_view
    chat.transfer.import_from(path)
    qtbot.waitUntil(lambda: not chat.transfer.busy, timeout=WAIT_MS)
    assert chat.notice.title() == "Imported chats from conversations.json"
    file_menu = window.menuBar().actions()[0].menu()
    file_menu.popup(window.mapToGlobal(QPoint(4, window.menuBar().height())))
    file_menu.setActiveAction(file_menu.actions()[2])  # Import chats…
    qtbot.wait(300)
    assert _grab(window).save(str(_target(tmp_path, "chat-import.png")))
    file_menu.close()


def test_presets_screenshot(qtbot, bridge, tmp_path):
    library = PresetLibrary(tmp_path / "presets.json")
    library.save_preset(
        ChatPreset("Terse coder", "You write Python. Answer with code first.", {"temperature": 0.2})
    )
    library.save_preset(
        ChatPreset("Long documents", "Summarise faithfully.", {}, LoadSettings(32768, "q8_0"))
    )
    window = _window(qtbot, bridge, tmp_path, library)
    chat = window.chat_view
    model = tmp_path / "Qwen3-8B-Q4_K_M.gguf"
    library.use_for_model(model, "Terse coder")
    load_fake_model(qtbot, bridge, model)  # the new chat starts from the model's preset
    assert chat.presets.picker.combo.currentText() == "Terse coder"
    chat.header.settings_button.click()
    picker = chat.presets.picker
    button = picker.actions_button
    picker.menu.popup(button.mapToGlobal(button.rect().bottomRight()))  # filled as it shows
    qtbot.wait(100)
    picker.menu.move(
        button.mapToGlobal(button.rect().bottomRight()) - QPoint(picker.menu.width(), 0)
    )  # left of the button, over the empty transcript rather than the settings
    library_action = next(a for a in picker.menu.actions() if a.text() == "System prompt library")
    picker.menu.setActiveAction(library_action)
    qtbot.wait(200)
    library_action.menu().popup(
        picker.menu.mapToGlobal(picker.menu.actionGeometry(library_action).topLeft())
        - QPoint(library_action.menu().sizeHint().width(), 0)
    )
    qtbot.wait(300)
    assert _grab(window).save(str(_target(tmp_path, "chat-presets.png")))
    library_action.menu().close()
    picker.menu.close()
