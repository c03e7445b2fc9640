"""The transcript follows a streaming reply to its end unless the person scrolled up; then a
"Jump to latest" button takes them back and following starts again."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.chat.view import ChatView
from engine.runtime import protocol as p
from tests.app.conftest import WAIT_MS, load_fake_model, shown
from tests.app.fake_engine import done

LINE = "A line of the reply that takes room in the transcript.\n\n"


@pytest.fixture
def chat(qtbot, bridge) -> ChatView:
    return shown(qtbot, ChatView(bridge), 700, 360)  # short: a few lines overflow it


def _send(qtbot, chat, client, text="Tell me a long story") -> int:
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    return client.commands[-1][1][0]


def _stream(qtbot, chat, client, request_id, n_lines):
    for _ in range(n_lines):
        before = chat.model.entries()[-1].text
        client.emit(p.TokenText(request_id=request_id, text=LINE))
        qtbot.waitUntil(lambda b=before: chat.model.entries()[-1].text != b, timeout=WAIT_MS)
        qtbot.wait(20)  # the relayout the longer row asks for


def _a_reply_taller_than_the_view(qtbot, bridge, chat, tmp_path):
    """(the fake engine, the request, the transcript's scroll bar) of a reply still streaming
    that has grown past the view's height."""
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    request_id = _send(qtbot, chat, client)
    bar = chat.transcript.verticalScrollBar()
    _stream(qtbot, chat, client, request_id, 12)
    qtbot.waitUntil(lambda: bar.maximum() > 100, timeout=WAIT_MS)
    return client, request_id, bar


def test_the_view_follows_a_streaming_reply_to_its_end(qtbot, bridge, chat, tmp_path):
    client, request_id, bar = _a_reply_taller_than_the_view(qtbot, bridge, chat, tmp_path)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=WAIT_MS)
    # The last tokens add a whole paragraph each (more than the "at the end" slack): still there.
    _stream(qtbot, chat, client, request_id, 6)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=WAIT_MS)
    assert chat.follower.following
    assert not chat.follower.button.isVisible()


def test_scrolled_up_it_stays_and_offers_jump_to_latest(qtbot, bridge, chat, tmp_path):
    client, request_id, bar = _a_reply_taller_than_the_view(qtbot, bridge, chat, tmp_path)

    bar.setValue(40)  # the person scrolls up to read
    assert not chat.follower.following
    qtbot.waitUntil(chat.follower.button.isVisible, timeout=WAIT_MS)
    _stream(qtbot, chat, client, request_id, 6)
    assert bar.value() == 40  # the reply grows below; the view does not move
    assert chat.follower.button.isVisible()

    qtbot.mouseClick(chat.follower.button, Qt.MouseButton.LeftButton)
    assert bar.value() == bar.maximum()
    assert not chat.follower.button.isVisible()
    _stream(qtbot, chat, client, request_id, 4)  # and it follows again
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=WAIT_MS)
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)


def test_scrolling_back_to_the_end_follows_again(qtbot, bridge, chat, tmp_path):
    client, request_id, bar = _a_reply_taller_than_the_view(qtbot, bridge, chat, tmp_path)
    bar.setValue(0)
    assert not chat.follower.following
    bar.setValue(bar.maximum())  # the person scrolls down to the end themselves
    assert chat.follower.following and not chat.follower.button.isVisible()
    _stream(qtbot, chat, client, request_id, 4)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=WAIT_MS)
