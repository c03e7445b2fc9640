"""Replies as markdown: highlighted code with a Copy link per block, collapsible reasoning, no
HTML from the model, and a 1,000-message transcript that scrolls quickly."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from app.chat.conversation_model import ROLE_ASSISTANT, ROLE_USER, ChatEntry
from app.chat.message_markdown import Colors, Thinking, render_markdown, split_thinking
from app.chat.view import ChatView
from tests.app.conftest import shown

COLORS = Colors("#f0f0f0", "#888888", "#0066cc", dark=False)
REPLY = (
    "Two ways:\n\n```python\ndef double(x):\n    return x * 2\n```\n\nand\n\n```sh\necho hi\n```\n"
)


@pytest.fixture
def chat(qtbot, bridge) -> ChatView:
    return shown(qtbot, ChatView(bridge), 900, 700)


@pytest.mark.parametrize(
    ("text", "reasoning", "answer", "finished"),
    [
        ("plain", None, "plain", True),
        ("<think>hmm</think>Yes.", "hmm", "Yes.", True),
        ("  <think>\nstill going", "still going", "", False),
        ("Yes <think>not at the start</think>", None, "Yes <think>not at the start</think>", True),
    ],
)
def test_split_thinking(text, reasoning, answer, finished):
    assert split_thinking(text) == Thinking(reasoning, answer, finished)


def test_code_blocks_are_highlighted_and_kept_for_copying():
    rendered = render_markdown(REPLY, COLORS)
    assert rendered.code_blocks == ("def double(x):\n    return x * 2", "echo hi")
    assert 'href="copy:0"' in rendered.html and 'href="copy:1"' in rendered.html
    assert "<span style=" in rendered.html  # Pygments colours, inline


@pytest.mark.parametrize(
    "hostile",
    [
        '<img src="x" onerror="alert(1)">',
        '<a href="javascript:alert(1)">click</a>',
        "[click](javascript:alert(1))",
        "<style>body{display:none}</style>",
        "[file](file:///etc/passwd)",
    ],
)
def test_model_output_cannot_inject_markup_or_live_links(hostile):
    html = render_markdown(hostile, COLORS).html
    assert "<img" not in html and "<style" not in html and "<a href" not in html


def _find_anchor(chat: ChatView, row: int, href: str) -> QPoint:
    index = chat.model.index(row)
    rect = chat.transcript.visualRect(index)
    font = chat.transcript.font()
    for y in range(rect.top(), rect.bottom(), 3):
        for x in range(rect.left(), rect.right(), 4):
            if chat.delegate.anchor_at(index, rect, QPoint(x, y), font) == href:
                return QPoint(x, y)
    raise AssertionError(f"no {href} link on screen")


def test_clicking_copy_puts_that_code_block_on_the_clipboard(qtbot, chat):
    chat.model.append(ChatEntry(role=ROLE_USER, text="how?"))
    chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text=REPLY))
    qtbot.wait(50)
    QGuiApplication.clipboard().clear()
    where = _find_anchor(chat, 1, "copy:1")
    with qtbot.waitSignal(chat.delegate.copied):
        qtbot.mouseClick(chat.transcript.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert QGuiApplication.clipboard().text() == "echo hi"


def test_reasoning_is_collapsed_until_clicked(qtbot, chat):
    chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text="<think>secret plan</think>Answer."))
    qtbot.wait(50)
    doc = lambda: chat.delegate._layout(0, chat.model.entry(0), chat.transcript.font()).document  # noqa: E731
    assert "secret plan" not in doc().toPlainText()
    assert "Thought (2 words)" in doc().toPlainText()
    height = chat.transcript.visualRect(chat.model.index(0)).height()
    qtbot.mouseClick(
        chat.transcript.viewport(),
        Qt.MouseButton.LeftButton,
        pos=_find_anchor(chat, 0, "think:toggle"),
    )
    assert "secret plan" in doc().toPlainText()
    qtbot.waitUntil(
        lambda: chat.transcript.visualRect(chat.model.index(0)).height() > height, timeout=2000
    )


def test_a_thousand_messages_scroll_smoothly(qtbot, chat):
    entries = []
    for i in range(500):
        entries.append(ChatEntry(role=ROLE_USER, text=f"Question {i}: how do I double a number?"))
        text = f"Answer **{i}**:\n\n```python\ndef double(x):\n    return x * 2\n```\n\nDone."
        entries.append(ChatEntry(role=ROLE_ASSISTANT, text=text, footer="40.0 tok/s"))
    started = time.perf_counter()
    chat.model.set_entries(entries)
    qtbot.wait(1)
    chat.transcript.scrollToBottom()
    first_layout = time.perf_counter() - started
    bar = chat.transcript.verticalScrollBar()
    assert bar.maximum() > 50_000  # every row was laid out at its real height
    viewport = chat.transcript.viewport()
    frames = []
    for value in range(bar.maximum(), 0, -bar.maximum() // 60):
        t = time.perf_counter()
        bar.setValue(value)
        viewport.repaint()
        frames.append(time.perf_counter() - t)
    frames.sort()
    # A frame of a 60 Hz display is 16 ms; allow slack for a slow, shared CI machine.
    assert frames[len(frames) // 2] < 0.030, frames
    assert frames[-1] < 0.150, frames
    assert first_layout < 20, first_layout


def test_a_switch_to_a_dark_palette_recolours_code_blocks(qtbot, chat, tmp_path):
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    from app.chat.message_delegate import colors_for

    chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text=REPLY))
    qtbot.wait(50)
    light_html = chat.delegate._layout(0, chat.model.entry(0), chat.transcript.font()).document
    light_background = colors_for(chat.transcript.palette()).code_background
    dark = QPalette(QApplication.instance().palette())
    dark.setColor(QPalette.ColorRole.Base, QColor(30, 30, 30))
    dark.setColor(QPalette.ColorRole.Window, QColor(40, 40, 40))
    dark.setColor(QPalette.ColorRole.Text, QColor(230, 230, 230))
    # As the system does when it switches to dark mode: the application's palette changes.
    app = QApplication.instance()
    light = app.palette()
    app.setPalette(dark)
    try:
        qtbot.wait(50)
        colors = colors_for(chat.transcript.palette())
        assert colors.dark and colors.code_background != light_background
        document = chat.delegate._layout(0, chat.model.entry(0), chat.transcript.font()).document
        assert document is not light_html  # laid out again, with the dark colours
        assert chat.grab().save(str(tmp_path / "dark.png"))
    finally:
        app.setPalette(light)
