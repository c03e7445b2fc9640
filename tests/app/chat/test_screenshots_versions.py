"""The real window, the real engine and the starter model: a reply regenerated twice and shown
at version 2 of 3 with its `‹ 2/3 ›` switch, and a long reply the person scrolled away from with
the "Jump to latest" button. It always runs (pictures into a temporary folder); with
HEARTH_SCREENSHOTS=1 it rewrites docs/screenshots/chat-versions.png and chat-jump-to-latest.png.
Run it under a real X server (Xvfb, QT_QPA_PLATFORM=xcb) to see the window as a person does."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as WaitTimeout

from engine.runtime import protocol as p
from tests.app.conftest import real_engine_window

pytestmark = pytest.mark.slow
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
LOAD_MS = 60_000
REPLY_MS = 180_000


def _target(tmp_path: Path, name: str) -> Path:
    return DOCS / name if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / name


class ReplyWatch:
    """What the engine streamed to the window for each request (tokens, when the first and the
    last came), so that a reply that does not end says whether it was still coming, slowly, or
    had stopped coming."""

    def __init__(self, window):
        self.window = window
        self.streamed: dict[int, list] = {}  # request id -> [tokens, first at, last at]
        window.bridge.token_text.connect(self._on_text)

    def _on_text(self, request_id: int, _text: str, n_tokens: int) -> None:
        now = time.monotonic()
        seen = self.streamed.setdefault(request_id, [0, now, now])
        seen[0] += n_tokens
        seen[2] = now

    def wait_for_end(self, qtbot) -> None:
        chat = self.window.chat_view
        try:
            qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)
        except WaitTimeout:
            pytest.fail(f"the reply did not end in {REPLY_MS / 1000:.0f} s: {self.state()}")

    def state(self) -> str:
        chat, bridge = self.window.chat_view, self.window.bridge
        now = time.monotonic()
        tokens, first, last = self.streamed.get(chat.request_id, [0, now, now])
        row = chat.model.entry(chat.model.rowCount() - 1) if chat.model.rowCount() else None
        loaded = bridge.model
        return (
            f"request {chat.request_id}: {tokens} tokens in {last - first:.1f} s, the last "
            f"{now - last:.1f} s ago; engine state {bridge.state}, its process alive "
            f"{bridge.client.alive}; last row: {len(row.text) if row else 0} characters, "
            f"streaming {row.streaming if row else None}; context "
            f"{loaded.n_ctx if loaded else None}; the engine's last lines: "
            f"{bridge.engine_last_lines()[-5:]}; load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} CPUs"
        )


def _ask(qtbot, watch: ReplyWatch, text: str) -> None:
    chat = watch.window.chat_view
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    watch.wait_for_end(qtbot)


@pytest.fixture
def window(qtbot, real_engine, starter_model, tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path / "data"))  # no real chats or models
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with real_engine_window(qtbot, starter_model, size=(1100, 720), load_ms=LOAD_MS) as window:
        window.chat_view.notice.hide()  # the "tiny demo model" note: not what these pictures show
        yield window


def test_versions_screenshot(qtbot, window, tmp_path):
    chat, watch = window.chat_view, ReplyWatch(window)
    chat.sampling = p.SamplingParams(temperature=0.9)  # a random seed: three different replies
    chat.max_tokens = 60
    _ask(qtbot, watch, "Suggest a name for a grey cat, and say why in one sentence.")
    for _ in range(2):
        chat.regenerate(1)
        watch.wait_for_end(qtbot)
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
    chat, watch = window.chat_view, ReplyWatch(window)
    chat.sampling = p.SamplingParams(temperature=0.7)
    chat.max_tokens = 120
    for question in ("What is a lighthouse?", "Who looks after one?", "Why are they tall?"):
        _ask(qtbot, watch, question)
    chat.max_tokens = 400
    bar = chat.transcript.verticalScrollBar()
    before = bar.maximum()
    chat.input.setPlainText("Tell me a long story about a lighthouse keeper and a storm.")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    # (A reply that ends in fewer lines, the model's end of text, is followed to its end too.)
    qtbot.waitUntil(lambda: bar.maximum() > before + 60 or not chat.generating, timeout=REPLY_MS)
    assert bar.maximum() > before and bar.value() == bar.maximum()  # following the reply
    bar.setValue(max(0, bar.maximum() - 320))  # the person scrolls up to reread
    watch.wait_for_end(qtbot)
    assert chat.follower.button.isVisible() and bar.value() < bar.maximum()
    qtbot.wait(200)
    target = _target(tmp_path, "chat-jump-to-latest.png")
    assert window.grab().save(str(target))
