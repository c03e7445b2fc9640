"""The chat page with a conversation store, against the fake engine: persistence, the sidebar,
crash mid-reply, regenerate, edit and resend, delete, system prompt, presets, context policy."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.chat.session import INCOMPLETE_FOOTER
from app.chat.settings import OVERFLOW_DROP_OLDEST
from app.chat.view import ChatView
from engine.chat.store import ConversationStore
from engine.enums import EngineState
from engine.runtime import protocol as p
from tests.app.chat.conftest import _chat
from tests.app.conftest import WAIT_MS, client_of
from tests.app.fake_engine import done


def _load(qtbot, bridge, tmp_path, n_ctx=4096):
    from engine.runtime import protocol as p

    bridge.load(p.ModelParams(path=str(tmp_path / "m.gguf")))
    client = client_of(bridge)
    client.emit_loaded(str(tmp_path / "m.gguf"), n_ctx=n_ctx)
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    return client


def _say(qtbot, chat, client, text, reply, *, finish=True):
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text=reply))
    qtbot.waitUntil(lambda: chat.model.entries()[-1].text == reply, timeout=WAIT_MS)
    if finish:
        client.emit(done(request_id, n_generated=43))
        qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    return request_id


def _texts(chat):
    return [e.text for e in chat.model.entries()]


def test_a_conversation_survives_closing_and_reopening(qtbot, bridge, store_path, tmp_path):
    store = ConversationStore.open(store_path)
    chat = _chat(qtbot, bridge, store)
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Where to in May?", "Lisbon.")
    _say(qtbot, chat, client, "Why?", "Light and food.")
    store.close()

    reopened = ConversationStore.open(store_path)
    again = _chat(qtbot, bridge, reopened)
    assert again.sidebar.titles() == ["Where to in May?"]
    again.open_conversation(reopened.conversations()[0].id)
    assert _texts(again) == ["Where to in May?", "Lisbon.", "Why?", "Light and food."]
    reply = reopened.branch(reopened.conversations()[0].id)[-1]
    assert (reply.model, reply.stats.n_generated, reply.stop_reason) == ("m.gguf", 43, "eos")
    assert reply.settings["temperature"] == chat.sampling.temperature
    assert again.model.entries()[-1].footer.startswith("42.0 tok/s")
    reopened.close()


def test_an_engine_crash_mid_reply_keeps_the_partial_reply_marked(
    qtbot, bridge, chat, store, tmp_path
):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Tell me a story", "Once upon", finish=False)
    client.crash()
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    (conversation,) = store.conversations()
    reply = store.branch(conversation.id)[-1]
    assert (reply.content, reply.partial) == ("Once upon", True)
    chat.new_chat()
    chat.open_conversation(conversation.id)
    assert chat.model.entries()[-1].partial
    assert chat.model.entries()[-1].footer == INCOMPLETE_FOOTER


def test_the_streaming_reply_is_written_while_it_grows(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Count", "1, 2, 3", finish=False)
    (conversation,) = store.conversations()
    qtbot.waitUntil(lambda: store.branch(conversation.id)[-1].content == "1, 2, 3", timeout=2000)
    assert store.branch(conversation.id)[-1].partial


def test_sidebar_new_rename_search_delete_and_ctrl_n(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Pasta for two", "Cacio e pepe.")
    qtbot.keyClick(chat.input, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert chat.model.rowCount() == 0 and chat.session.conversation_id is None
    _say(qtbot, chat, client, "Trip to Lisbon", "Go in May.")
    assert chat.sidebar.titles() == ["Trip to Lisbon", "Pasta for two"]

    pasta = store.conversations("pasta")[0].id
    chat.sidebar.rename(pasta, "  Dinner  ideas ")
    chat.sidebar.search.setText("dinner")
    assert chat.sidebar.titles() == ["Dinner ideas"]
    chat.sidebar.search.setText("cacio")  # message text is searched too
    assert chat.sidebar.titles() == ["Dinner ideas"]
    chat.sidebar.search.clear()

    chat.sidebar.list.itemClicked.emit(chat.sidebar.list.item(1))
    assert _texts(chat) == ["Pasta for two", "Cacio e pepe."]
    chat.sidebar.delete(pasta)  # the open one: the page starts a new chat
    assert chat.sidebar.titles() == ["Trip to Lisbon"]
    assert chat.model.rowCount() == 0


def test_regenerate_keeps_the_old_reply_as_a_version(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "A name for a cat?", "Miso.")
    chat.regenerate(1)
    request_id = client.commands[-1][1][0]
    assert client.commands[-1][1][1] == (p.ChatMessage(role="user", content="A name for a cat?"),)
    client.emit(p.TokenText(request_id=request_id, text="Pixel."))
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert _texts(chat) == ["A name for a cat?", "Pixel."]
    assert chat.session.entries("x")[1].branches == (2, 2)
    chat.show_version(1, -1)
    assert _texts(chat) == ["A name for a cat?", "Miso."]
    assert chat.model.entry(1).branches == (1, 2)
    menu_texts = [a.text() for a in chat.context_menu(1).actions()]
    assert "Next version (1/2)" in menu_texts and "Regenerate" in menu_texts


def test_edit_and_resend_branches_and_keeps_the_old(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "Capital of Frnace?", "Paris.")
    _say(qtbot, chat, client, "And Spain?", "Madrid.")
    chat.edit_message(2)
    assert chat.input.toPlainText() == "And Spain?" and chat.edit_notice.isVisible()
    chat.input.setPlainText("And Italy?")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    assert client.commands[-1][1][1][-1] == p.ChatMessage(role="user", content="And Italy?")
    assert len(client.commands[-1][1][1]) == 3  # the old question is not sent
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text="Rome."))
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert _texts(chat) == ["Capital of Frnace?", "Paris.", "And Italy?", "Rome."]
    assert len(store.messages(chat.session.conversation_id)) == 6
    chat.show_version(2, -1)
    assert _texts(chat) == ["Capital of Frnace?", "Paris.", "And Spain?", "Madrid."]


def test_escape_cancels_an_edit(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "hi", "hello")
    chat.edit_message(0)
    qtbot.keyClick(chat.input, Qt.Key.Key_Escape)
    assert not chat.edit_notice.isVisible() and chat.input.toPlainText() == ""


def test_copy_and_delete_a_message(qtbot, bridge, chat, store, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "one", "two")
    chat.transcript.setCurrentIndex(chat.model.index(1))
    chat.copy_selected()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == "two"
    chat.delete_message(1)
    assert _texts(chat) == ["one"]
    assert [m.content for m in store.branch(chat.session.conversation_id)] == ["one"]


def test_system_prompt_and_preset_reach_the_engine_and_are_saved(
    qtbot, bridge, chat, store, tmp_path
):
    client = _load(qtbot, bridge, tmp_path)
    chat.settings_panel.system_prompt.setPlainText("Answer in French.")
    chat.settings_panel.preset.setCurrentText("Deterministic")
    chat.settings_panel.seed.setValue(7)
    _say(qtbot, chat, client, "Hello", "Bonjour")
    (_rid, messages, sampling, _max) = client.commands[-1][1]
    assert messages[0] == p.ChatMessage(role="system", content="Answer in French.")
    assert (sampling.temperature, sampling.top_k, sampling.seed) == (0.0, 1, 7)
    saved = store.conversation(chat.session.conversation_id)
    assert (
        saved.system_prompt == "Answer in French." and saved.settings["preset"] == "Deterministic"
    )
    chat.settings_panel.temperature.setValue(0.9)  # a hand edit is no longer the preset
    assert chat.settings_panel.preset.currentText() == "Custom"


def test_context_usage_is_shown_after_a_reply(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path, n_ctx=1000)
    assert chat.header.context_label.text() == "Context 0 / 1,000 (0%)"
    _say(qtbot, chat, client, "hi", "hello")
    assert chat.header.context_label.text() == "Context 63 / 1,000 (6%)"  # 20 prompt + 43


def test_the_worker_is_asked_to_fit_by_the_chat_policy(qtbot, bridge, chat, tmp_path):
    """The window sends the whole conversation, the overflow policy and the room for the
    reply; the worker fits it with exact counts (tests/engine/runtime/test_context_fit_worker)."""
    client = _load(qtbot, bridge, tmp_path, n_ctx=600)
    chat.max_tokens = 100
    _say(qtbot, chat, client, "x" * 600, "ok")
    assert client.fitting[-1] == {"overflow": "stop", "reply_room": 100, "chat_format": ""}
    chat.settings_panel.overflow.setCurrentIndex(
        chat.settings_panel.overflow.findData(OVERFLOW_DROP_OLDEST)
    )
    chat.max_tokens = 1000
    _say(qtbot, chat, client, "y" * 900, "fine")
    assert client.fitting[-1]["reply_room"] == 150  # 600 // 4
    assert client.fitting[-1]["overflow"] == "drop_oldest"
    assert len(client.commands[-1][1][1]) == 3  # the whole conversation: x, ok, y


def test_overflow_with_stop_policy_says_so(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path, n_ctx=600)
    chat.input.setPlainText("y" * 900)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    request_id = client.commands[-1][1][0]
    message = "The conversation (700 tokens) and room for a reply no longer fit. Start a new chat."
    client.emit(p.GenerationFailed(request_id=request_id, message=message, context_full=True))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert chat.context_notice.isVisible() and "Start a new chat" in chat.context_notice.text()
    assert chat.send_button.isEnabled()  # nothing is stuck


def test_dropped_turns_are_said(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path, n_ctx=600)
    chat.input.setPlainText("go on")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    request_id = client.commands[-1][1][0]
    client.emit(p.PromptFitted(request_id=request_id, n_prompt_tokens=420, messages_dropped=4))
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert chat.context_notice.title() == "Oldest turns left out"
    assert chat.context_notice.text().startswith("4 of the oldest messages")


def test_a_context_full_stop_shows_a_notice(qtbot, bridge, chat, tmp_path):
    client = _load(qtbot, bridge, tmp_path)
    chat.input.setPlainText("go")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    request_id = client.commands[-1][1][0]
    client.emit(done(request_id, stop_reason="context_full"))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert chat.context_notice.isVisible()


def test_an_unopenable_history_says_chats_will_not_be_saved(qtbot, bridge, tmp_path):
    from app.chat.session import open_app_store

    (tmp_path / "file").write_text("not a folder")
    store, error = open_app_store(tmp_path / "file" / "chats.sqlite3")
    assert store is None and "will not be saved" in error
    view = ChatView(bridge, store_error=error)
    qtbot.addWidget(view)
    view.show()
    assert view.notice.isVisible() and view.notice.title() == "Chats will not be saved"


def test_open_app_store_opens_a_working_store(tmp_path):
    from app.chat.session import open_app_store

    store, error = open_app_store(tmp_path / "hearth" / "chats.sqlite3")
    assert error is None and store.conversations() == []
    store.close()


def test_sidebar_double_click_rename_and_confirmed_delete(
    qtbot, bridge, chat, store, tmp_path, monkeypatch
):
    from PySide6.QtWidgets import QMessageBox

    client = _load(qtbot, bridge, tmp_path)
    _say(qtbot, chat, client, "first", "reply")
    item = chat.sidebar.list.item(0)
    item.setText("Renamed in place")  # what the inline editor does when editing ends
    assert store.conversations()[0].title == "Renamed in place"

    answers = iter([QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes])
    monkeypatch.setattr(QMessageBox, "question", lambda *args, **kwargs: next(answers))
    conversation_id = store.conversations()[0].id
    chat.sidebar._confirm_delete(conversation_id, "Renamed in place")
    assert len(store.conversations()) == 1  # "No" keeps it
    chat.sidebar._confirm_delete(conversation_id, "Renamed in place")
    assert store.conversations() == [] and chat.model.rowCount() == 0


def test_a_partial_reply_write_after_the_store_closed_stops_quietly(qtbot, tmp_path):
    """The app closes its store while a reply may still be streaming: the session's timer for
    partial writes must not raise into Qt's event loop (sqlite's closed database) but stop."""
    from app.chat.session import ChatSession
    from engine.chat.store import ConversationStore

    store = ConversationStore.open(tmp_path / "chats.db")
    session = ChatSession(store)
    session.ensure_conversation("hello", {})
    session.start_reply(None, "model", {})
    session.reply_grew("half a rep")
    store.close()
    session.flush_partial()
    assert not session._timer.isActive()
