"""A model without a chat template: the header says so and offers plain completion or a
built-in format, the choice is remembered per model and sent with every reply."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt

from app.chat.view import ChatView
from engine.enums import EngineState
from engine.runtime import protocol as p
from engine.session import ChatFormats
from tests.app.conftest import WAIT_MS, client_of, shown
from tests.app.fake_engine import done, model_loaded


def _view(qtbot, bridge, tmp_path) -> ChatView:
    return shown(
        qtbot, ChatView(bridge, chat_formats=ChatFormats(tmp_path / "formats.json")), 1000, 600
    )


def _load(qtbot, bridge, event: p.ModelLoaded):
    bridge.load(p.ModelParams(path=event.path))
    client_of(bridge).emit(event)
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    return client_of(bridge)


def _send(qtbot, view, client, text="Once upon a time") -> dict:
    view.input.setPlainText(text)
    qtbot.keyClick(view.input, Qt.Key.Key_Return)
    request_id = client.commands[-1][1][0]
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not view.generating, timeout=WAIT_MS)
    return client.fitting[-1]


BASE = replace(
    model_loaded("/models/gemma-3-270m.gguf"),
    own_chat_template=False,
    builtin_formats=("chatml", "gemma", "llama3"),
    suggested_format="gemma",
)


def test_a_base_model_offers_plain_completion_or_a_format(qtbot, bridge, tmp_path):
    view = _view(qtbot, bridge, tmp_path)
    client = _load(qtbot, bridge, BASE)
    header = view.header
    assert header.format_note.isVisible() and header.chat_format.isVisible()
    assert header.chat_format.itemText(0) == "Plain completion"
    assert header.chat_format.currentData() == "gemma"  # the suggestion, until one is chosen
    assert _send(qtbot, view, client)["chat_format"] == "gemma"

    index = header.chat_format.findData(p.PLAIN_COMPLETION)
    header.chat_format.setCurrentIndex(index)
    header.chat_format.activated.emit(index)  # what a person's pick emits
    assert _send(qtbot, view, client)["chat_format"] == p.PLAIN_COMPLETION
    assert ChatFormats(tmp_path / "formats.json").get(BASE.path) == p.PLAIN_COMPLETION

    # the next time this model loads, the choice is back
    _load(qtbot, bridge, model_loaded("/models/instruct.gguf"))
    assert not header.chat_format.isVisible()
    client = _load(qtbot, bridge, BASE)
    assert header.chat_format.currentData() == p.PLAIN_COMPLETION


def test_a_model_with_its_own_template_offers_nothing(qtbot, bridge, tmp_path):
    view = _view(qtbot, bridge, tmp_path)
    client = _load(qtbot, bridge, model_loaded("/models/instruct.gguf"))
    assert not view.header.format_note.isVisible()
    assert _send(qtbot, view, client)["chat_format"] == ""
