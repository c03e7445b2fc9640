"""The chat page against a fake engine: sending, streaming, stats, Stop, and repaint throttling."""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import replace

import pytest
from PySide6.QtCore import QEvent, QObject, Qt

from app.chat.conversation_model import ROLE_ASSISTANT, ROLE_USER, ChatEntry, stats_line
from app.chat.view import ChatView
from app.common.engine_bridge import FLUSH_INTERVAL_MS
from engine.enums import EngineState
from engine.runtime import protocol as p
from tests.app.conftest import WAIT_MS, client_of, load_fake_model, shown
from tests.app.fake_engine import done


@pytest.fixture
def chat(qtbot, bridge) -> ChatView:
    return shown(qtbot, ChatView(bridge), 700, 500)


def _type_and_press_enter(qtbot, chat: ChatView, text: str) -> None:
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)


def test_send_is_disabled_until_a_model_is_loaded(qtbot, bridge, chat, tmp_path):
    assert not chat.send_button.isEnabled()
    assert not chat.stop_button.isEnabled()
    bridge.start()
    _type_and_press_enter(qtbot, chat, "hello?")
    assert chat.model.rowCount() == 0
    assert "generate" not in client_of(bridge).names()

    load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    assert chat.send_button.isEnabled()


def test_enter_sends_and_shift_enter_adds_a_line(qtbot, bridge, chat, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    chat.input.setPlainText("first line")
    chat.input.moveCursor(chat.input.textCursor().MoveOperation.End)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(chat.input, "second line")
    assert chat.input.toPlainText() == "first line\nsecond line"
    assert "generate" not in client.names()

    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    assert chat.input.toPlainText() == ""
    (_, (_rid, messages, _sampling, _max)) = client.commands[-1]
    assert messages == (p.ChatMessage(role="user", content="first line\nsecond line"),)
    assert [e.role for e in chat.model.entries()] == [ROLE_USER, ROLE_ASSISTANT]
    assert not chat.send_button.isEnabled()
    assert chat.stop_button.isEnabled()


def test_a_reply_streams_into_the_last_message_and_gets_its_stats(qtbot, bridge, chat, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    chat.sampling = p.SamplingParams(temperature=0)
    _type_and_press_enter(qtbot, chat, "Say hello")
    request_id = client.commands[-1][1][0]
    assert client.commands[-1][1][2] == p.SamplingParams(temperature=0)

    for piece in ("Hel", "lo", " there"):
        client.emit(p.TokenText(request_id=request_id, text=piece))
    qtbot.waitUntil(lambda: chat.model.entry(1).text == "Hello there", timeout=WAIT_MS)
    assert chat.model.entry(1).streaming
    client.emit(done(request_id, n_generated=43))
    qtbot.waitUntil(lambda: not chat.model.entry(1).streaming, timeout=WAIT_MS)

    footer = chat.model.entry(1).footer
    assert footer == "42.0 tok/s · 0.12 s to first token · 43 tokens · end of reply"
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()

    # The next turn sends the whole visible conversation.
    _type_and_press_enter(qtbot, chat, "Again")
    assert client.commands[-1][1][1] == (
        p.ChatMessage(role="user", content="Say hello"),
        p.ChatMessage(role="assistant", content="Hello there"),
        p.ChatMessage(role="user", content="Again"),
    )


def test_text_of_another_request_is_not_shown(qtbot, bridge, chat, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "hi")
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id + 7, text="stale"))
    client.emit(p.TokenText(request_id=request_id, text="fresh"))
    qtbot.waitUntil(lambda: chat.model.entry(1).text == "fresh", timeout=WAIT_MS)


@pytest.mark.parametrize("how", ["button", "escape"])
def test_stop_asks_the_engine_to_stop(qtbot, bridge, chat, tmp_path, how):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "Count to 1000")
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text="1, 2, 3"))
    qtbot.waitUntil(lambda: chat.model.entry(1).text == "1, 2, 3", timeout=WAIT_MS)
    if how == "button":
        qtbot.mouseClick(chat.stop_button, Qt.MouseButton.LeftButton)
    else:
        chat.input.setFocus()
        qtbot.keyClick(chat.input, Qt.Key.Key_Escape)
    # Its own request only: API requests sharing the worker go on.
    assert client.commands[-1] == ("stop", request_id)
    assert bridge.state == EngineState.GENERATING  # until the engine says it stopped
    client.emit(done(request_id, n_generated=3, stop_reason="stopped"))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert chat.model.entry(1).footer.endswith("· 3 tokens · stopped")
    assert chat.model.entry(1).text == "1, 2, 3"


def test_a_failed_reply_is_marked_and_left_out_of_the_next_prompt(qtbot, bridge, chat, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "hi")
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text="partial"))
    client.emit(p.GenerationFailed(request_id=request_id, message="context is full"))
    qtbot.waitUntil(lambda: chat.model.entry(1).failed, timeout=WAIT_MS)
    assert "context is full" in chat.model.entry(1).footer
    assert chat.model.chat_messages() == [p.ChatMessage(role="user", content="hi")]


def test_a_reply_the_store_cannot_write_still_ends_and_says_so(
    qtbot, bridge, chat, tmp_path, monkeypatch
):
    """The store's writes run inside the reply's own events: one that raises (a full disk) must
    not leave the reply open in the window, Send off, until a new chat."""
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "hi")
    request_id = client.commands[-1][1][0]

    def disk_full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(chat.session.store, "update_partial", disk_full)
    monkeypatch.setattr(chat.session.store, "finish_message", disk_full)
    client.emit(p.TokenText(request_id=request_id, text="Hello"))
    client.emit(done(request_id, n_generated=1))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert not chat.generating and chat.send_button.isEnabled()
    entry = chat.model.entry(1)
    assert entry.text == "Hello" and not entry.streaming and "1 token" in entry.footer
    assert chat.notice.isVisible() and chat.notice.title() == "The reply was not saved"
    assert "disk is full" in chat.notice.text()


def test_a_crash_mid_reply_ends_it_and_disables_send(qtbot, bridge, chat, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "hi")
    client.crash()
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert "Interrupted" in chat.model.entry(1).footer
    assert not chat.send_button.isEnabled() and not chat.stop_button.isEnabled()


def test_a_helper_machine_gone_mid_reply_is_named_in_the_kept_partial_reply(
    qtbot, bridge, chat, tmp_path
):
    from engine.runtime.client import EngineCrashed

    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "hi")
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text="partial"))
    client.alive = False
    client.emit(EngineCrashed(-6, ("Remote RPC server crashed",), (), ("10.0.0.2:50052",)))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    entry = chat.model.entry(1)
    assert entry.text == "partial"
    assert "helper machine 10.0.0.2:50052 went away" in entry.footer


def test_new_chat_clears_the_transcript(qtbot, bridge, chat, tmp_path):
    load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    chat.model.append(ChatEntry(role=ROLE_USER, text="old"))
    qtbot.mouseClick(chat.new_chat_button, Qt.MouseButton.LeftButton)
    assert chat.model.rowCount() == 0


def test_a_reply_shows_its_speed_beside_the_bound_for_this_model_and_device(
    qtbot, bridge, chat, tmp_path
):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "Say hello")
    request_id = client.commands[-1][1][0]
    finished = done(request_id, n_generated=43)  # 42.0 tok/s
    stats = replace(finished.stats, bound_tokens_per_second=168.0)
    client.emit(replace(finished, stats=stats))
    qtbot.waitUntil(lambda: not chat.model.entry(1).streaming, timeout=WAIT_MS)
    footer = chat.model.entry(1).footer
    assert footer.startswith("42.0 tok/s (25% of the 168 tok/s bound) · 0.12 s to first token")


def test_stats_line_handles_a_one_token_reply():
    line = stats_line(done(1, n_generated=1, stop_reason="max_tokens"))
    assert line == "0.0 tok/s · 0.12 s to first token · 1 token · token limit reached"


class _PaintCounter(QObject):
    def __init__(self):
        super().__init__()
        self.paints = 0

    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint:
            self.paints += 1
        return False


def test_a_2000_token_burst_repaints_the_transcript_about_30_times_a_second(
    qtbot, bridge, chat, tmp_path
):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    _type_and_press_enter(qtbot, chat, "Write a lot")
    request_id = client.commands[-1][1][0]
    qtbot.wait(100)  # let the repaints of sending settle
    counter = _PaintCounter()
    chat.transcript.viewport().installEventFilter(counter)
    flushes_before = bridge.flush_count

    started = time.monotonic()

    def play_tokens():
        for i in range(2000):
            client.emit(p.TokenText(request_id=request_id, text="tok "))
            if i % 100 == 99:
                time.sleep(0.02)  # a fast decode: about 5,000 tokens a second

    reader = threading.Thread(target=play_tokens)
    reader.start()
    qtbot.waitUntil(lambda: chat.model.entry(1).text.count("tok ") == 2000, timeout=WAIT_MS * 2)
    reader.join()
    qtbot.wait(100)  # the repaint of the last flush
    elapsed = time.monotonic() - started
    chat.transcript.viewport().removeEventFilter(counter)

    flushes = bridge.flush_count - flushes_before
    allowed = 2 + elapsed / (FLUSH_INTERVAL_MS / 1000)
    assert 1 <= flushes <= allowed
    # Each flush may repaint the view once (Qt merges the rest); never once per token.
    assert 1 <= counter.paints <= allowed + 2, (counter.paints, flushes, elapsed)


def test_a_model_at_a_path_that_is_not_utf8_can_be_chatted_with(qtbot, bridge, chat, tmp_path):
    import os

    path = os.fsdecode(bytes(tmp_path) + b"/model-\xff.gguf")  # lone surrogates, as from disk
    client = load_fake_model(qtbot, bridge, path)
    _type_and_press_enter(qtbot, chat, "hello")
    assert "generate" in client.names()  # the reply was started and stored
    assert [e.role for e in chat.model.entries()] == [ROLE_USER, ROLE_ASSISTANT]
