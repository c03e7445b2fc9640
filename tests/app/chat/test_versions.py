"""Versions of a message switch at once with the `‹ 2/3 ›` control on it; the title follows an
edited first message unless the chat was renamed; the author label is the same live and after
reopening."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics

from app.chat.session import author_label
from app.chat.version_switch import version_switch
from engine.runtime import protocol as p
from engine.starter_model import STARTER_FILE
from tests.app.chat.conftest import _chat
from tests.app.chat.test_actions import _load, _say, _texts
from tests.app.conftest import WAIT_MS
from tests.app.fake_engine import done


def _reply(qtbot, chat, client, text):
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text=text))
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)


def _click_arrow(qtbot, chat, row, which):
    """Click the previous or next arrow of the row's version switch, where it is painted."""
    index = chat.model.index(row)
    switch = chat.delegate.switch_for(
        chat.transcript.visualRect(index), chat.model.entry(row), chat.transcript.font()
    )
    assert switch is not None, "no version switch on this message"
    target = switch.previous if which == "previous" else switch.next
    qtbot.mouseClick(chat.transcript.viewport(), Qt.MouseButton.LeftButton, pos=target.center())


def test_a_regenerated_reply_shows_its_switch_at_once_and_it_switches(
    qtbot, bridge, chat, tmp_path
):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "A name for a cat?", "Miso.")
    assert chat.model.entry(1).branches == (1, 1)
    chat.regenerate(1)
    assert chat.model.entry(1).branches == (2, 2)  # while it streams, not only after reopening
    _reply(qtbot, chat, client, "Pixel.")
    chat.regenerate(1)
    _reply(qtbot, chat, client, "Tofu.")
    assert chat.model.entry(1).branches == (3, 3)

    _click_arrow(qtbot, chat, 1, "previous")
    assert _texts(chat) == ["A name for a cat?", "Pixel."]
    assert chat.model.entry(1).branches == (2, 3)
    _click_arrow(qtbot, chat, 1, "previous")
    assert _texts(chat)[1] == "Miso."
    _click_arrow(qtbot, chat, 1, "previous")  # the first version: the arrow does nothing
    assert _texts(chat)[1] == "Miso."
    _click_arrow(qtbot, chat, 1, "next")
    assert _texts(chat)[1] == "Pixel."


def test_the_switch_does_nothing_while_a_reply_streams(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "A name for a cat?", "Miso.")
    chat.regenerate(1)
    _reply(qtbot, chat, client, "Pixel.")
    _say(qtbot, chat, client, "And a dog?", "Rex.", finish=False)
    assert not chat.delegate.versions_enabled
    _click_arrow(qtbot, chat, 1, "previous")
    assert _texts(chat)[1] == "Pixel."


def test_an_edited_message_switches_back_with_its_control(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Capital of Frnace?", "Paris.")
    _say(qtbot, chat, client, "And Spain?", "Madrid.")
    chat.edit_message(2)
    chat.input.setPlainText("And Italy?")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    assert chat.model.entry(2).branches == (2, 2)
    _reply(qtbot, chat, client, "Rome.")
    _click_arrow(qtbot, chat, 2, "previous")
    assert _texts(chat) == ["Capital of Frnace?", "Paris.", "And Spain?", "Madrid."]


def _edit_first(qtbot, chat, client, text):
    chat.edit_message(0)
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    _reply(qtbot, chat, client, "Paris.")


def test_the_title_follows_an_edited_first_message(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Capital of Frnace?", "Paris.")
    _edit_first(qtbot, chat, client, "Capital of France?")
    chat_id = chat.session.conversation_id
    assert store.conversation(chat_id).title == "Capital of France?"
    assert chat.header.title.text() == "Capital of France?"
    assert chat.sidebar.titles() == ["Capital of France?"]
    _click_arrow(qtbot, chat, 0, "previous")  # the first version shown again: its title too
    assert store.conversation(chat_id).title == "Capital of Frnace?"
    assert chat.header.title.text() == "Capital of Frnace?"


def test_a_renamed_chat_keeps_its_name_when_the_first_message_is_edited(
    qtbot, bridge, chat, store, tmp_path
):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Capital of Frnace?", "Paris.")
    chat.sidebar.rename(chat.session.conversation_id, "Geography")
    _edit_first(qtbot, chat, client, "Capital of France?")
    assert store.conversation(chat.session.conversation_id).title == "Geography"
    assert chat.header.title.text() == "Geography"


def test_the_author_label_is_the_same_live_and_after_reopening(
    qtbot, bridge, chat, store, tmp_path
):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "hi", "hello")
    live = chat.model.entry(1).author
    assert live == "m"  # the model file's name without .gguf
    again = _chat(qtbot, bridge, store)
    again.open_conversation(chat.session.conversation_id)
    assert again.model.entry(1).author == live
    assert again.delegate._label(again.model.entry(1)) == chat.delegate._label(chat.model.entry(1))


def test_author_label():
    assert author_label("Qwen3-8B-Q4_K_M.gguf", "Assistant") == "Qwen3-8B-Q4_K_M"
    assert author_label(STARTER_FILE, "Assistant") == "SmolLM2 135M Instruct"
    assert author_label("", "Assistant") == "Assistant"


def test_the_switch_sits_beside_the_label_and_only_with_versions():
    metrics = QFontMetrics(QFont())
    label = QRect(18, 14, 600, metrics.height())
    assert version_switch(label, 80, metrics, (1, 1), on_right=False) is None
    switch = version_switch(label, 80, metrics, (2, 3), on_right=False)
    assert switch.text == "2/3" and switch.previous.left() > label.left() + 80
    assert switch.step_at(switch.previous.center()) == -1
    assert switch.step_at(switch.next.center()) == +1
    assert switch.step_at(switch.counter.center()) == 0
    assert switch.step_at(QPoint(0, 0)) == 0
    first = version_switch(label, 80, metrics, (1, 3), on_right=False)
    assert first.step_at(first.previous.center()) == 0  # nothing before the first
    mine = version_switch(label, 30, metrics, (2, 2), on_right=True)
    assert mine.next.right() < label.right() - 30  # left of a right-aligned "You"
