"""Write docs/screenshots/chat.png: the chat window with a real answer streamed from the starter
model. Runs only with HEARTH_SCREENSHOTS=1, since it rewrites a file in the repository:

    HEARTH_SCREENSHOTS=1 QT_QPA_PLATFORM=offscreen .venv/bin/pytest tests/app/test_screenshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.engine_bridge import STATE_IDLE, EngineBridge
from app.main_window import MainWindow
from app.theme import apply_theme
from engine.runtime import protocol as p

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "chat.png"
QUESTIONS = (
    "What is the capital of France? Answer in one sentence.",
    "Give me three short tips for staying focused while studying.",
)

pytestmark = pytest.mark.skipif(
    os.environ.get("HEARTH_SCREENSHOTS") != "1", reason="set HEARTH_SCREENSHOTS=1 to write it"
)


def test_write_the_chat_screenshot(qtbot, real_engine, starter_model):
    apply_theme(QApplication.instance())
    bridge = EngineBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(1100, 760)
    window.show()
    try:
        bridge.start()
        window.load_model(starter_model)
        qtbot.waitUntil(lambda: bridge.state == STATE_IDLE, timeout=60_000)
        chat = window.chat_view
        chat.sampling = p.SamplingParams(temperature=0)
        chat.max_tokens = 200
        for question in QUESTIONS:
            chat.input.setPlainText(question)
            qtbot.keyClick(chat.input, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: not chat.generating, timeout=120_000)
            assert chat.model.entries()[-1].footer.count("tok/s") == 1
        qtbot.wait(200)

        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        assert window.grab().save(str(SCREENSHOT))
        image = QImage(str(SCREENSHOT))
        assert (image.width(), image.height()) == (window.width(), window.height())
    finally:
        bridge.shutdown()
