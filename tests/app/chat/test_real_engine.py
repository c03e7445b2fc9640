"""The chat window with the real engine worker and the starter model (SmolLM2-135M, on the CPU).

Greedy sampling keeps replies deterministic. Timeouts are generous: the CI machine has 2 cores.
"""

from __future__ import annotations

import os
import re

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from app.common.engine_bridge import EngineBridge
from app.shell.gui_main import run_gui
from app.shell.main_window import MainWindow
from engine.enums import EngineState
from engine.runtime import protocol as p
from engine.starter_model import STARTER_LABEL
from tests.app.conftest import open_on_real_engine

pytestmark = pytest.mark.slow

LOAD_MS = 60_000
REPLY_MS = 120_000
STATS = re.compile(
    # the speed of light beside the speed (not after a one-token reply: no decode step timed)
    r"^\d+\.\d tok/s(?: \(\d+% of the [\d,.]+ tok/s bound\))? · \d+\.\d\d s to first token · "
    r"\d+ tokens? · "
    r"(end of reply|token limit reached|stop string)$"
)


def _open_window(qtbot, starter_model, env=None) -> MainWindow:
    window = open_on_real_engine(
        qtbot, starter_model, size=(900, 650), bridge=EngineBridge(env=env), load_ms=LOAD_MS
    )
    window.chat_view.sampling = p.SamplingParams(temperature=0)
    return window


@pytest.fixture
def window(qtbot, real_engine, starter_model):
    window = _open_window(qtbot, starter_model)
    yield window
    window.bridge.shutdown()


def _send(qtbot, window: MainWindow, text: str) -> None:
    chat = window.chat_view
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    assert chat.generating


def _reply(window: MainWindow):
    return window.chat_view.model.entries()[-1]


def test_a_reply_streams_in_and_shows_its_stats(qtbot, window):
    chat = window.chat_view
    seen_while_streaming: list[str] = []
    window.bridge.token_text.connect(
        lambda *_: seen_while_streaming.append(_reply(window).text) if chat.generating else None
    )
    _send(qtbot, window, "What is the capital of France? Answer in one sentence.")
    qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)

    reply = _reply(window)
    assert reply.role == "assistant" and not reply.failed
    assert "Paris" in reply.text
    assert STATS.match(reply.footer), reply.footer
    assert "tok/s bound)" in reply.footer  # the worker measured the CPU's copy rate
    # The text arrived in pieces, each a prefix of the final reply.
    assert len(seen_while_streaming) >= 2
    assert all(reply.text.startswith(piece) for piece in seen_while_streaming)
    assert chat.send_button.isEnabled()


def test_stop_ends_a_long_reply_early(qtbot, window):
    chat = window.chat_view
    chat.max_tokens = 2000
    _send(qtbot, window, "Write a very long story about a dragon who learns to cook.")
    qtbot.waitUntil(lambda: len(_reply(window).text) > 40, timeout=REPLY_MS)
    qtbot.mouseClick(chat.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)

    footer = _reply(window).footer
    assert footer.endswith("· stopped"), footer
    n_tokens = int(re.search(r"(\d+) tokens", footer).group(1))
    assert 0 < n_tokens < 2000
    # The engine is ready for the next turn.
    _send(qtbot, window, "Thanks. Now say hi.")
    qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)
    assert STATS.match(_reply(window).footer), _reply(window).footer


def test_a_bad_drop_leaves_the_model_working(qtbot, window, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model")
    window.open_model_file(bad)
    assert "not a readable GGUF file" in window.file_banner.text()
    assert window.bridge.state == EngineState.IDLE
    _send(qtbot, window, "Say hello.")
    qtbot.waitUntil(lambda: not window.chat_view.generating, timeout=REPLY_MS)
    assert STATS.match(_reply(window).footer), _reply(window).footer


def test_loading_the_model_again_replaces_it(qtbot, window, starter_model):
    first_pid = window.bridge._client.pid
    assert window.open_model_file(starter_model)
    qtbot.waitUntil(lambda: window.bridge.state == EngineState.IDLE, timeout=LOAD_MS)
    assert window.bridge._client.pid == first_pid  # same worker, model swapped inside it
    assert STARTER_LABEL in window.model_label.text()
    _send(qtbot, window, "Say hello.")
    qtbot.waitUntil(lambda: not window.chat_view.generating, timeout=REPLY_MS)
    assert STATS.match(_reply(window).footer), _reply(window).footer


def test_an_engine_abort_is_reported_and_reload_recovers(qtbot, real_engine, starter_model):
    faulty = dict(os.environ, HEARTH_WORKER_FAULT="abort_after_tokens=5")
    window = _open_window(qtbot, starter_model, env=faulty)
    bridge, chat, banner = window.bridge, window.chat_view, window.engine_banner
    try:
        _send(qtbot, window, "Tell me about the moon.")
        qtbot.waitUntil(banner.isVisible, timeout=REPLY_MS)

        assert bridge.state == EngineState.CRASHED
        assert "SIGABRT" in banner.text()
        assert "fault injection" in banner.details()
        assert "Interrupted" in _reply(window).footer
        # The GUI is alive and responsive.
        assert window.isVisible()
        qtbot.keyClicks(chat.input, "still here")
        assert chat.input.toPlainText() == "still here"
        chat.input.clear()

        bridge.set_worker_env(None)
        reload_button = banner.action_buttons()[0]
        assert reload_button.text() == "Reload model"
        qtbot.mouseClick(reload_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=LOAD_MS)
        assert not banner.isVisible()

        _send(qtbot, window, "What is the capital of France? Answer in one sentence.")
        qtbot.waitUntil(lambda: not chat.generating, timeout=REPLY_MS)
        assert "Paris" in _reply(window).text
        assert STATS.match(_reply(window).footer), _reply(window).footer
    finally:
        bridge.shutdown()


def test_run_gui_refuses_a_bad_model_and_falls_back_to_the_starter(qtbot, real_engine, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    seen: dict[str, str] = {}

    def check_then_close():
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
        live = [w for w in windows if w.isVisible()]
        if live and live[0].bridge.state == EngineState.IDLE:
            seen["banner"] = live[0].file_banner.text()
            seen["model"] = live[0].model_label.text()
            live[0].close()  # the last window: the application quits
        else:
            QTimer.singleShot(100, check_then_close)

    QTimer.singleShot(100, check_then_close)
    safety_net = QTimer()  # should the load hang
    safety_net.setSingleShot(True)
    safety_net.timeout.connect(QApplication.quit)
    safety_net.start(LOAD_MS)
    try:
        assert run_gui(["--model", str(bad)]) == 0
    finally:
        safety_net.stop()
    assert "not a readable GGUF file" in seen["banner"]
    assert STARTER_LABEL in seen["model"]
