"""Chat settings: a new chat starts from the loaded model's defaults (not from the chat that was
open), and opening the settings never widens the window."""

from __future__ import annotations

import pytest

from app.chat.settings import DEFAULTS, new_chat_settings
from app.chat.view import ChatView
from app.shell.main_window import MainWindow
from app.shell.pages import CHAT, PageSpec
from tests.app.chat.test_actions import _load, _say
from tests.engine.chat.test_sampling_defaults import write_model


def test_a_new_chat_takes_the_models_defaults_not_the_open_chats(qtbot, bridge, chat, tmp_path):
    write_model(tmp_path / "m.gguf", {"temp": 0.6, "top_k": 20})
    client = _load(qtbot, bridge, tmp_path)  # loads tmp_path/m.gguf
    assert chat.settings_panel.values()["temperature"] == 0.6  # the first chat too
    chat.settings_panel.system_prompt.setPlainText("Talk like a pirate.")
    chat.settings_panel.temperature.setValue(1.3)
    chat.settings_panel.max_tokens.setValue(77)
    _say(qtbot, chat, client, "Ahoy?", "Arr.")

    chat.new_chat()
    values = chat.settings_panel.values()
    assert values["system_prompt"] == ""
    assert (values["temperature"], values["top_k"]) == (0.6, 20)
    assert values["max_tokens"] == DEFAULTS["max_tokens"]
    assert values["preset"] == "Custom"  # 0.6 / 20 is none of the presets
    # The chat that was open keeps its own settings.
    (pirate,) = chat.session.store.conversations()
    chat.open_conversation(pirate.id)
    assert chat.settings_panel.values()["system_prompt"] == "Talk like a pirate."


def test_without_recommendations_a_new_chat_has_hearths_defaults(qtbot, bridge, chat, tmp_path):
    write_model(tmp_path / "m.gguf", {})
    _load(qtbot, bridge, tmp_path)
    chat.settings_panel.temperature.setValue(1.3)
    chat.new_chat()
    assert chat.settings_panel.values() == new_chat_settings() == DEFAULTS


@pytest.mark.parametrize("width", [None, 900, 1100])
def test_opening_the_settings_does_not_widen_the_window(qtbot, bridge, width):
    window = MainWindow(bridge, pages=[PageSpec(CHAT, lambda host: ChatView(host.bridge))])
    qtbot.addWidget(window)
    window.resize(width or window.minimumSizeHint().width(), 600)
    window.show()
    qtbot.waitExposed(window)
    before = window.width()
    chat: ChatView = window.chat_view
    chat.header.settings_button.click()
    qtbot.wait(50)
    assert chat.settings_drawer.isVisible()
    assert window.width() == before
    assert window.minimumSizeHint().width() <= before
    if width == 1100:  # room enough: the whole panel, no scrolling sideways
        assert not chat.settings_drawer.horizontalScrollBar().isVisible()
    chat.header.settings_button.click()
    assert not chat.settings_drawer.isVisible()


def test_settings_changed_before_the_model_loads_are_kept(qtbot, bridge, chat, tmp_path):
    write_model(tmp_path / "m.gguf", {"temp": 0.6})
    chat.settings_panel.temperature.setValue(1.3)  # the person is quicker than the load
    _load(qtbot, bridge, tmp_path)
    assert chat.settings_panel.values()["temperature"] == 1.3
