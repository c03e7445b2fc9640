"""The real window, the real engine and the starter model: a reply regenerated twice and shown
at version 2 of 3 with its `‹ 2/3 ›` switch, and a long reply the person scrolled away from with
the "Jump to latest" button. It always runs (pictures into a temporary folder); with
HEARTH_SCREENSHOTS=1 it rewrites docs/screenshots/chat-versions.png and chat-jump-to-latest.png.
Run it under a real X server (Xvfb, QT_QPA_PLATFORM=xcb) to see the window as a person does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from engine.runtime import protocol as p
from tests.app.conftest import real_engine_window

pytestmark = pytest.mark.slow
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
LOAD_MS = 60_000
REPLY_MS = 180_000


def _target(tmp_path: Path, name: str) -> Path:
    return DOCS / name if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / name


def _ask(qtbot, chat, text: str) -> None:
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)


@pytest.fixture
def window(qtbot, real_engine, starter_model, tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path / "data"))  # no real chats or models
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with real_engine_window(qtbot, starter_model, size=(1100, 720), load_ms=LOAD_MS) as window:
        window.chat_view.notice.hide()  # the "tiny demo model" note: not what these pictures show
        yield window


def test_versions_screenshot(qtbot, window, tmp_path):
    chat = window.chat_view
    chat.sampling = p.SamplingParams(temperature=0.9)  # a random seed: three different replies
    chat.max_tokens = 60
    _ask(qtbot, chat, "Suggest a name for a grey cat, and say why in one sentence.")
    for _ in range(2):
        chat.regenerate(1)
        qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)
    assert chat.model.entry(1).branches == (3, 3)
    third = chat.model.entry(1).message_id
    index = chat.model.index(1)
    switch = chat.delegate.switch_for(
        chat.transcript.visualRect(index), chat.model.entry(1), chat.transcript.font()
    )
    qtbot.mouseClick(
        chat.transcript.viewport(), Qt.MouseButton.LeftButton, pos=switch.previous.center()
    )
    assert chat.model.entry(1).branches == (2, 3) and chat.model.entry(1).message_id != third
    qtbot.wait(200)
    target = _target(tmp_path, "chat-versions.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    assert window.grab().save(str(target))


def test_jump_to_latest_screenshot(qtbot, window, tmp_path):
    chat = window.chat_view
    chat.sampling = p.SamplingParams(temperature=0.7)
    chat.max_tokens = 120
    for question in ("What is a lighthouse?", "Who looks after one?", "Why are they tall?"):
        _ask(qtbot, chat, question)
    chat.max_tokens = 400
    bar = chat.transcript.verticalScrollBar()
    before = bar.maximum()
    chat.input.setPlainText("Tell me a long story about a lighthouse keeper and a storm.")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bar.maximum() > before + 60, timeout=REPLY_MS)
    assert bar.value() == bar.maximum()  # following the reply as it streams
    bar.setValue(max(0, bar.maximum() - 320))  # the person scrolls up to reread
    qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)
    assert chat.follower.button.isVisible() and bar.value() < bar.maximum()
    qtbot.wait(200)
    target = _target(tmp_path, "chat-jump-to-latest.png")
    assert window.grab().save(str(target))
