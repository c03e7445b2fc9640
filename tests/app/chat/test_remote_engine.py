"""The chat window with a remote OpenAI-compatible server as its engine (a stand-in server on
127.0.0.1): the dialog finds the server's models and keeps the key in a keyring (an in-memory
one), a reply streams with the server's stats, Stop ends it, and an unreachable server ends the
reply with a message."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.chat.conversation_model import ROLE_ASSISTANT
from app.chat.remote_dialog import RemoteServerDialog
from app.chat.view import ChatView
from engine.remote import keys
from engine.remote.endpoints import RemoteChoice, load_choice
from tests.app.conftest import WAIT_MS

from .openai_stand_in import OpenAIStandIn

KEY = "sk-remote-123"


@pytest.fixture
def stand_in():
    with OpenAIStandIn(key=KEY, models=("qwen-remote", "other")) as server:
        yield server


@pytest.fixture
def chat(qtbot, bridge, tmp_path) -> ChatView:
    view = ChatView(bridge, remote_choice_path=tmp_path / "remote.json")
    qtbot.addWidget(view)
    view.resize(900, 500)
    view.show()
    return view


def _send(qtbot, chat: ChatView, text: str) -> None:
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)


def test_the_dialog_lists_the_servers_models_and_keeps_the_key(qtbot, stand_in, memory_keyring):
    dialog = RemoteServerDialog()
    qtbot.addWidget(dialog)
    dialog.url.setText(stand_in.url)  # no /v1: added
    dialog.key.setText(KEY)
    dialog.get_models.click()
    qtbot.waitUntil(dialog.models.isEnabled, timeout=WAIT_MS)
    assert [dialog.models.itemText(i) for i in range(dialog.models.count())] == [
        "qwen-remote",
        "other",
    ]
    dialog.accept()
    assert dialog.choice() == RemoteChoice(stand_in.url + "/v1", "qwen-remote")
    assert keys.read_key(stand_in.url + "/v1") == KEY and not dialog.key_note


def test_a_wrong_key_is_said_in_the_dialog(qtbot, stand_in):
    dialog = RemoteServerDialog()
    qtbot.addWidget(dialog)
    dialog.url.setText(stand_in.url)
    dialog.key.setText("wrong")
    dialog.get_models.click()
    qtbot.waitUntil(dialog.get_models.isEnabled, timeout=WAIT_MS)
    assert "refused the API key (401" in dialog.status.text()
    assert not dialog.ok_button.isEnabled()


def test_without_a_keyring_the_key_is_used_for_this_session_and_that_is_said(qtbot, stand_in):
    dialog = RemoteServerDialog()  # tests/conftest.py: keyring's "no backend" backend
    qtbot.addWidget(dialog)
    dialog.url.setText(stand_in.url)
    dialog.key.setText(KEY)
    dialog.get_models.click()
    qtbot.waitUntil(dialog.models.isEnabled, timeout=WAIT_MS)
    dialog.accept()
    assert "could not be saved in the system keyring" in dialog.key_note
    assert dialog.api_key() == KEY


def test_a_chat_replies_from_the_remote_server_with_its_stats(qtbot, chat, stand_in, tmp_path):
    assert not chat.send_button.isEnabled()  # no local model, no remote chosen
    chat.engine_source.use_remote(RemoteChoice(stand_in.url + "/v1", "qwen-remote"), KEY)
    assert chat.engine_source.button.text().startswith("Engine: qwen-remote on 127.0.0.1:")
    assert chat.engine_source.button.toolTip().startswith("Replies come from qwen-remote on")
    assert load_choice(tmp_path / "remote.json").model == "qwen-remote"  # offered next time
    assert chat.send_button.isEnabled()
    _send(qtbot, chat, "Hi there")
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    reply = chat.model.entries()[-1]
    assert (reply.role, reply.text, reply.author) == (ROLE_ASSISTANT, "Hello there", "qwen-remote")
    # The server's usage: 2 tokens, so one decode step; the time to first text measured here.
    assert reply.footer.endswith("s to first token · 2 tokens · end of reply")
    assert "tok/s" in reply.footer and not reply.failed
    (body,) = stand_in.requests
    assert body["model"] == "qwen-remote" and body["stream"]
    assert body["messages"] == [{"role": "user", "content": "Hi there"}]
    assert stand_in.auth[-1] == f"Bearer {KEY}"
    stored = chat.session.store.branch(chat.session.conversation_id)
    assert [(m.role, m.content, m.model) for m in stored][-1] == (
        "assistant",
        "Hello there",
        "qwen-remote",
    )


def test_stop_ends_a_remote_reply(qtbot, chat, stand_in):
    stand_in.hold = True
    chat.engine_source.use_remote(RemoteChoice(stand_in.url + "/v1", "qwen-remote"), KEY)
    _send(qtbot, chat, "Tell me a long story")
    qtbot.waitUntil(lambda: chat.model.entries()[-1].text == "Hello", timeout=WAIT_MS)
    assert chat.stop_button.isEnabled()
    chat.stop_button.click()
    stand_in.release.set()  # the next piece comes, and the stop is seen
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    reply = chat.model.entries()[-1]
    assert reply.text == "Hello" and reply.footer.endswith("stopped") and not reply.failed
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()


def test_a_server_without_usage_gets_a_line_without_speed(qtbot, chat, stand_in):
    stand_in.usage = None
    chat.engine_source.use_remote(RemoteChoice(stand_in.url + "/v1", "qwen-remote"), KEY)
    _send(qtbot, chat, "Hi")
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    footer = chat.model.entries()[-1].footer
    assert footer.endswith("s to first token · end of reply") and "tok/s" not in footer


def test_an_unreachable_server_ends_the_reply_with_what_to_do(qtbot, chat):
    with OpenAIStandIn() as gone:
        url = gone.url  # a port nothing listens on once it is closed
    chat.engine_source.use_remote(RemoteChoice(url + "/v1", "m"), "")
    _send(qtbot, chat, "Hi")
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    reply = chat.model.entries()[-1]
    assert reply.failed and "Could not reach 127.0.0.1" in reply.footer
    assert "that the server is running" in reply.footer
    chat.engine_source.use_local()
    assert chat.engine_source.button.text() == "Engine: This computer"
    assert not chat.send_button.isEnabled()  # the local engine has no model
