"""Presets in the chat header: saved from a chat, chosen to set its settings, the one a model's
new chats start from, the system prompt library, and a preset's load part going through the
window's load policy."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialog

from app.chat.presets import NO_PRESET, SavePresetDialog
from app.chat.view import ChatView
from engine.chat.presets import ChatPreset, LoadSettings, PresetLibrary
from engine.session import RememberedSettings
from tests.app.conftest import load_fake_model, shown


class FakeHost:
    """What the chat page asks of the window for a preset's load part."""

    class _Opener:
        def __init__(self, remembered):
            self.remembered = remembered

    def __init__(self, tmp_path: Path):
        self.opener = self._Opener(RememberedSettings(tmp_path / "model-settings.json"))
        self.opened: list[str] = []

    def open_model_file(self, path) -> bool:
        self.opened.append(str(path))
        return True


@pytest.fixture
def library(tmp_path):
    return PresetLibrary(tmp_path / "chat-presets.json")


@pytest.fixture
def host(tmp_path):
    return FakeHost(tmp_path)


@pytest.fixture
def view(qtbot, bridge, store, library, host) -> ChatView:
    return shown(qtbot, ChatView(bridge, store=store, presets=library, host=host), 1100, 600)


def _items(view) -> list[str]:
    combo = view.presets.picker.combo
    return [combo.itemText(i) for i in range(combo.count())]


def test_the_picker_sits_in_the_header_with_names_for_screen_readers(view):
    picker = view.presets.picker
    assert picker.parent() is view.header
    assert picker.combo.accessibleName() == "Chat preset"
    assert picker.actions_button.accessibleName() == "Presets and system prompts"
    assert _items(view) == [NO_PRESET]


def test_a_preset_saved_from_a_chat_sets_another_chat(view, library, store):
    view.settings_panel.set_values(
        {**view.settings_panel.values(), "system_prompt": "Be terse.", "temperature": 0.2}
    )
    assert view.presets.save_current("Terse", include_load=False, for_model=False)
    assert _items(view) == [NO_PRESET, "Terse"]
    saved = library.preset("Terse")
    assert saved.system_prompt == "Be terse." and saved.sampling["temperature"] == 0.2
    assert saved.load is None

    view.new_chat()  # no model: Hearth's defaults, no preset
    assert view.system_prompt == ""
    assert view.presets.current is None
    chat = store.create_conversation("Chat")
    store.add_message(chat.id, "user", "hello")
    view.open_conversation(chat.id)
    view.presets.picker.combo.setCurrentIndex(1)
    view.presets.picker.combo.activated.emit(1)  # chosen as a person chooses it
    assert view.system_prompt == "Be terse."
    assert view.sampling.temperature == pytest.approx(0.2)
    assert view.settings_panel.values()["preset"] == "Custom"
    chat = store.conversation(view.session.conversation_id)
    assert chat.system_prompt == "Be terse." and chat.settings["temperature"] == 0.2


def test_a_new_chat_with_a_model_starts_from_its_preset(qtbot, view, bridge, library, tmp_path):
    model = tmp_path / "tiny.gguf"
    library.save_preset(ChatPreset("Pirate", "Talk like a pirate.", {"top_k": 7}))
    library.use_for_model(model, "Pirate")
    load_fake_model(qtbot, bridge, model)  # an untouched new chat takes the model's start
    assert view.system_prompt == "Talk like a pirate."
    assert view.settings_panel.values()["top_k"] == 7
    assert view.presets.picker.combo.currentText() == "Pirate"
    view.settings_panel.set_values({**view.settings_panel.values(), "system_prompt": "x"})
    view.new_chat()
    assert view.system_prompt == "Talk like a pirate."
    library.use_for_model(model, None)
    view.new_chat()
    assert view.system_prompt == "" and view.presets.current is None


def test_opening_a_saved_chat_keeps_its_own_settings(view, store, library):
    library.save_preset(ChatPreset("Pirate", "Talk like a pirate."))
    view.presets.refresh("Pirate")
    chat = store.create_conversation("Old", system_prompt="Old prompt")
    store.add_message(chat.id, "user", "hi")
    view.open_conversation(chat.id)
    assert view.system_prompt == "Old prompt"
    assert view.presets.current is None


def test_a_presets_load_part_is_remembered_and_the_model_loaded_again(
    qtbot, view, bridge, library, host, tmp_path
):
    model = tmp_path / "tiny.gguf"
    load_fake_model(qtbot, bridge, model)  # 4096 tokens, f16, llama.cpp
    library.save_preset(ChatPreset("Long", "", {}, LoadSettings(8192, "q8_0")))
    view.presets.refresh()
    view.presets.apply("Long")
    choice = host.opener.remembered.get(model)
    assert (choice.n_ctx, choice.kv_type, choice.engine) == (8192, "q8_0", "llama")
    assert host.opened == [str(model)]
    assert view.notice.title() == "Loading tiny.gguf again for “Long”"
    # a preset that matches how the model is loaded loads nothing again
    library.save_preset(ChatPreset("Same", "", {}, LoadSettings(4096, "f16")))
    view.presets.apply("Same")
    assert host.opened == [str(model)]


def test_a_load_part_the_engine_cannot_hold_is_refused_with_the_reason(
    qtbot, view, bridge, library, host, tmp_path
):
    model = tmp_path / "tiny.gguf"
    load_fake_model(qtbot, bridge, model)
    library.save_preset(ChatPreset("Odd", "Hi.", {}, LoadSettings(8192, "kivi4")))
    view.presets.apply("Odd")
    assert view.notice.title() == "“Odd” cannot load this model as it says"
    assert host.opened == [] and host.opener.remembered.get(model) is None
    assert view.system_prompt == "Hi."  # the chat part still applies


def test_the_menu_offers_the_prompt_library_and_ties_a_preset_to_the_model(
    qtbot, view, bridge, library, tmp_path
):
    model = tmp_path / "tiny.gguf"
    load_fake_model(qtbot, bridge, model)
    library.save_preset(ChatPreset("Pirate", "Talk like a pirate."))
    view.presets.refresh("Pirate")
    view.presets._fill_menu()
    menu = view.presets.picker.menu
    actions = {a.text(): a for a in menu.actions()}
    tie = actions["Start new chats with tiny.gguf from “Pirate”"]
    assert not tie.isChecked()
    tie.trigger()
    assert library.preset_for_model(model).name == "Pirate"
    assert "Delete preset “Pirate”" in actions
    prompts = {a.text(): a for a in actions["System prompt library"].menu().actions()}
    prompts["Code reviewer"].trigger()
    assert view.system_prompt.startswith("You review code.")
    actions["Delete preset “Pirate”"].trigger()
    assert _items(view) == [NO_PRESET] and library.preset_for_model(model) is None


def test_the_save_dialog_offers_the_models_load_settings(qtbot, view, bridge, tmp_path, library):
    model = tmp_path / "tiny.gguf"
    load_fake_model(qtbot, bridge, model)
    dialog = SavePresetDialog(view, bridge.model)
    qtbot.addWidget(dialog)
    assert dialog.include_load.text() == (
        "Also load the model with context 4,096 · KV f16 · llama.cpp"
    )
    assert dialog.for_model.isChecked() and dialog.name.accessibleName() == "Preset name"

    def accept(self):
        self.name.setText("Mine")
        self.include_load.setChecked(True)
        return QDialog.DialogCode.Accepted

    from pytest import MonkeyPatch

    with MonkeyPatch.context() as patch:
        patch.setattr(SavePresetDialog, "exec", accept)
        view.presets.ask_save()
    assert library.preset("Mine").load == LoadSettings(4096, "f16", None, "llama")
    assert library.preset_for_model(model).name == "Mine"


def test_a_preset_without_a_name_is_not_saved_and_says_why(view, library):
    assert not view.presets.save_current("  ", include_load=False, for_model=False)
    assert view.notice.title() == "The preset was not saved"
    assert view.notice.text() == "A name is needed."
    assert library.presets() == []


def test_a_system_prompt_is_saved_to_the_library(view, library):
    view.settings_panel.set_values({**view.settings_panel.values(), "system_prompt": "Rhyme."})
    assert view.presets.save_system_prompt("Poet")
    assert library.system_prompts()[-1].text == "Rhyme."
