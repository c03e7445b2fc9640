"""The chat window with real answers streamed from the starter model, grabbed as a picture.

It always runs (into a temporary folder); with HEARTH_SCREENSHOTS=1 it rewrites
docs/screenshots/chat.png:

    HEARTH_SCREENSHOTS=1 QT_QPA_PLATFORM=offscreen \
        .venv/bin/pytest tests/app/shell/test_screenshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from engine.runtime import protocol as p
from tests.app.conftest import real_engine_window

SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "screenshots" / "chat.png"
QUESTIONS = (
    "What is the capital of France? Answer in one sentence.",
    "Give me three short tips for staying focused while studying.",
)


def test_the_chat_window_answers_on_screen(qtbot, real_engine, starter_model, tmp_path):
    target = SCREENSHOT if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / "chat.png"
    with real_engine_window(qtbot, starter_model) as window:
        chat = window.chat_view
        chat.sampling = p.SamplingParams(temperature=0)
        chat.max_tokens = 200
        for question in QUESTIONS:
            chat.input.setPlainText(question)
            qtbot.keyClick(chat.input, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: not chat.generating, timeout=120_000)
            footer = chat.model.entries()[-1].footer
            # one speed per reply, with the speed-of-light bound beside it where one is known
            assert footer.count("tok/s") == 1 + footer.count("tok/s bound)"), footer
        qtbot.wait(200)

        target.parent.mkdir(parents=True, exist_ok=True)
        assert window.grab().save(str(target))
        image = QImage(str(target))
        assert (image.width(), image.height()) == (window.width(), window.height())
        # Not a blank grab: the transcript area holds text of several colours.
        colours = {image.pixel(x, y) for x in range(200, 1000, 7) for y in range(80, 400, 7)}
        assert len(colours) > 20
