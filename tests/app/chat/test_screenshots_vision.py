"""The chat window with an image sent to a vision model (its thumbnail above the question and a
reply under it) and another image waiting in the box. The reply comes from the test suite's fake
engine; the real pipeline is tests/engine/runtime/test_vision.py. It always runs (the picture
into a temporary folder); with HEARTH_SCREENSHOTS=1 it rewrites docs/screenshots/chat-vision.png."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPointF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage, QLinearGradient, QPainter, QPixmap

from engine.runtime import protocol as p
from tests.app.chat.test_screenshots_transfer import _target, _window
from tests.app.conftest import WAIT_MS, load_fake_model
from tests.app.fake_engine import done


def _picture(width: int, height: int, a: str, b: str) -> QImage:
    image = QImage(width, height, QImage.Format.Format_RGB32)
    painter = QPainter(image)
    gradient = QLinearGradient(QPointF(0, 0), QPointF(width, height))
    gradient.setColorAt(0, QColor(a))
    gradient.setColorAt(1, QColor(b))
    painter.fillRect(image.rect(), gradient)
    painter.setBrush(QColor("#f4d35e"))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(QPointF(width * 0.7, height * 0.3), height * 0.15, height * 0.15)
    painter.end()
    return image


def _grab(window) -> QPixmap:
    """The whole window (the box with its waiting image is at the bottom)."""
    if QGuiApplication.platformName() == "xcb":
        frame = window.frameGeometry()
        return window.screen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
    return window.grab()


def _paste(chat, image: QImage) -> None:
    mime = QMimeData()
    mime.setImageData(image)
    chat.input.insertFromMimeData(mime)


def test_vision_screenshot(qtbot, bridge, tmp_path):
    window = _window(qtbot, bridge, tmp_path)
    chat = window.chat_view
    client = load_fake_model(qtbot, bridge, tmp_path / "gemma-3-4b-it-Q4_K_M.gguf")
    _paste(chat, _picture(480, 320, "#1d3557", "#e76f51"))
    chat.input.setPlainText("What is in this picture?")
    chat.send()
    request_id = client.commands[-1][1][0]
    assert len(client.commands[-1][1][1][-1].images) == 1
    client.emit(p.TokenText(request_id=request_id, text=(
        "A sunset over the sea: a deep blue sky fading into orange near the horizon, with "
        "a pale yellow sun high on the right."
    )))  # fmt: skip
    client.emit(done(request_id, n_generated=31))
    qtbot.waitUntil(lambda: not chat.model.entry(1).streaming, timeout=WAIT_MS)
    _paste(chat, _picture(300, 300, "#2a9d8f", "#264653"))
    chat.input.setPlainText("And this one?")
    qtbot.wait(200)
    assert len(chat.attachments.buttons()) == 1
    assert _grab(window).save(str(_target(tmp_path, "chat-vision.png")))
