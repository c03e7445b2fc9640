"""The transcript's painting: markdown for replies, a layout cache that keeps long chats cheap."""

from __future__ import annotations

import pytest

from app.chat.conversation_model import ROLE_ASSISTANT, ROLE_USER, ChatEntry
from app.chat.message_delegate import MessageDelegate
from app.chat.view import ChatView
from tests.app.conftest import shown


@pytest.fixture
def chat(qtbot, bridge) -> ChatView:
    return shown(qtbot, ChatView(bridge), 700, 500)


def _document_text(chat: ChatView, row: int) -> str:
    entry = chat.model.entry(row)
    return chat.delegate._layout(row, entry, chat.transcript.font()).document.toPlainText()


def test_replies_render_markdown_but_not_html(chat):
    chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text="**Paris** is <b>big</b>"))
    assert _document_text(chat, 0) == "Paris is <b>big</b>"


def test_what_the_user_typed_is_shown_as_typed(chat):
    chat.model.append(ChatEntry(role=ROLE_USER, text="**not bold** <i>x</i>"))
    assert _document_text(chat, 0) == "**not bold** <i>x</i>"


class _CountingDelegate(MessageDelegate):
    def __init__(self, view):
        super().__init__(view)
        self.size_hints_asked = 0

    def sizeHint(self, option, index):
        self.size_hints_asked += 1
        return super().sizeHint(option, index)


def test_streaming_into_a_long_chat_relayouts_only_when_the_reply_wraps(qtbot, chat):
    chat.delegate = _CountingDelegate(chat.transcript)
    chat.transcript.setItemDelegate(chat.delegate)
    for i in range(500):
        chat.model.append(ChatEntry(role=ROLE_USER, text=f"question {i}"))
        chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text=f"answer **{i}**\n\nmore text"))
    reply_row = chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text="Zero", streaming=True))
    chat.transcript.scrollToBottom()
    qtbot.wait(300)  # the relayouts that follow the scroll bar appearing
    assert chat.model.rowCount() == 1001

    chat.delegate.size_hints_asked = 0
    for word in ("One", " two", " three", " four", " five"):
        chat.model.append_text(reply_row, word)
        chat.transcript.scrollToBottom()
        qtbot.wait(5)
    # The reply grew but stayed one line: no row was asked for its size again.
    assert chat.delegate.size_hints_asked < 20
    assert _document_text(chat, reply_row) == "ZeroOne two three four five"

    one_line = chat.transcript.visualRect(chat.model.index(reply_row)).height()
    scroll_range = chat.transcript.verticalScrollBar().maximum()
    chat.model.append_text(reply_row, " and many more words to wrap" * 20)
    # Now the reply is taller, and the view lays the rows out again to make room for it.
    bar = chat.transcript.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > scroll_range + 50, timeout=2000)
    assert chat.transcript.visualRect(chat.model.index(reply_row)).height() > one_line + 50


def test_rows_are_laid_out_again_when_the_view_gets_narrower(qtbot, chat):
    chat.model.append(ChatEntry(role=ROLE_ASSISTANT, text="word " * 200))
    index = chat.model.index(0)
    wide = chat.transcript.visualRect(index).height()
    chat.resize(400, 500)
    qtbot.waitUntil(lambda: chat.transcript.visualRect(index).height() > wide, timeout=2000)
