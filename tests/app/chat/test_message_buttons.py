"""A message's actions in sight (Copy, Regenerate, Edit, Continue) on its label line: which
ones show, that a click does what it says, Continue going on with a stopped reply in place; the
demo-model notice staying through an edit; Apply and reload asking first during a reply."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.chat.conversation_model import ROLE_ASSISTANT, ROLE_USER, ChatEntry
from app.chat.message_buttons import CONTINUE, COPY, EDIT, REGENERATE, actions_for
from app.common import banner as b
from engine.runtime import protocol as p
from tests.app.chat.test_actions import _load, _say, _texts
from tests.app.conftest import WAIT_MS
from tests.app.fake_engine import done

REPLY = ChatEntry(ROLE_ASSISTANT, "Miso.", footer="42.0 tok/s · 3 tokens · end of reply")
STOPPED = ChatEntry(ROLE_ASSISTANT, "Once upon", footer="42.0 tok/s · 3 tokens · stopped")
LIMIT = ChatEntry(ROLE_ASSISTANT, "Once", footer="1 token · token limit reached")
ASKED = ChatEntry(ROLE_USER, "A name for a cat?")


@pytest.mark.parametrize(
    ("entry", "idle", "can_reply", "last", "expected"),
    [
        (REPLY, True, True, True, (COPY, REGENERATE)),
        (STOPPED, True, True, True, (COPY, REGENERATE, CONTINUE)),
        (LIMIT, True, True, True, (COPY, REGENERATE, CONTINUE)),
        (STOPPED, True, True, False, (COPY, REGENERATE)),  # only the last reply goes on
        (STOPPED, True, False, True, (COPY,)),  # no model ready
        (REPLY, False, True, True, (COPY,)),  # another reply is being written
        (ASKED, True, True, False, (COPY, EDIT)),
        (ASKED, False, True, False, (COPY,)),
        (ChatEntry(ROLE_ASSISTANT, "Onc", streaming=True), True, True, True, ()),
        (ChatEntry(ROLE_ASSISTANT, "x", footer="stopped", failed=True), True, True, True,
         (COPY, REGENERATE)),
    ],
)  # fmt: skip
def test_which_actions_a_message_shows(entry, idle, can_reply, last, expected):
    assert actions_for(entry, idle=idle, can_reply=can_reply, last=last) == expected


def _click(qtbot, chat, row: int, action: str) -> None:
    index = chat.model.index(row)
    rect = chat.transcript.visualRect(index)
    buttons = chat.delegate.buttons_for(index, rect, chat.transcript.font())
    (target,) = [r for name, r in buttons.buttons if name == action]
    qtbot.mouseClick(chat.transcript.viewport(), Qt.MouseButton.LeftButton, pos=target.center())


def test_the_buttons_in_sight_copy_regenerate_and_edit(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "A name for a cat?", "Miso.")
    _click(qtbot, chat, 1, COPY)
    assert QGuiApplication.clipboard().text() == "Miso."
    _click(qtbot, chat, 1, REGENERATE)
    assert chat.generating and client.names()[-1] == "generate"
    client.emit(done(client.commands[-1][1][0]))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    _click(qtbot, chat, 0, EDIT)
    assert chat.input.toPlainText() == "A name for a cat?"


def test_continue_goes_on_with_a_stopped_reply_in_place(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    request_id = _say(qtbot, chat, client, "Tell a story", "Once upon", finish=False)
    client.emit(done(request_id, stop_reason="stopped"))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    _click(qtbot, chat, 1, CONTINUE)
    request_id, messages, _sampling, _max = client.commands[-1][1]
    assert client.continued and messages[-1] == p.ChatMessage(role="assistant", content="Once upon")
    client.emit(p.TokenText(request_id=request_id, text=" a time."))
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert _texts(chat) == ["Tell a story", "Once upon a time."]
    stored = store.branch(chat.session.conversation_id)
    assert [m.content for m in stored] == ["Tell a story", "Once upon a time."]


def test_the_demo_notice_stays_through_an_edit(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    chat.notice.show_message(b.INFO, "You are chatting with a tiny demo model", "")
    _say(qtbot, chat, client, "hi", "hello")
    chat.edit_message(0)
    chat.input.setPlainText("hi there")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    assert chat.notice.isVisible() and chat.notice.title().startswith("You are chatting")
    assert not chat.edit_notice.isVisible()
    client.emit(done(client.commands[-1][1][0]))  # the reply ends before the store closes
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)


def test_apply_and_reload_during_a_reply_asks_first(qtbot, bridge, tmp_path):
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
    from tests.app.model.test_panel import GAMING_PC, _panel

    client = _load(qtbot, bridge, tmp_path)
    bridge.generate([p.ChatMessage(role="user", content="hi")])
    panel = _panel(qtbot, bridge, tmp_path, GAMING_PC)
    asked = []
    panel._confirm_stop_reply = lambda: asked.append(True) or False
    panel.set_model(write_sparse_gguf(tmp_path / "l.gguf", SHAPES["llama3-8b"], "Q4_K_M"))
    loads = len(client.loads())
    panel.apply()
    assert asked and len(client.loads()) == loads  # cancelled: the reply goes on
