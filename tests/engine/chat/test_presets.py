"""Chat presets and the system prompt library: stored, replaced, checked, per model; a damaged
file or entry never stops a chat."""

from __future__ import annotations

import json

import pytest

from engine.chat.presets import (
    BUILT_IN_PROMPTS,
    ChatPreset,
    LoadSettings,
    PresetError,
    PresetLibrary,
    preset_from,
)


@pytest.fixture
def library(tmp_path):
    return PresetLibrary(tmp_path / "chat-presets.json")


def test_a_preset_is_saved_and_read_back(library):
    preset = ChatPreset(
        "Coder", "Be terse.", {"temperature": 0.2, "top_k": 20}, LoadSettings(8192, "q8_0")
    )
    library.save_preset(preset)
    assert library.presets() == [preset]
    assert PresetLibrary(library.path).preset("Coder") == preset
    assert preset.chat_settings() == {"system_prompt": "Be terse.", "temperature": 0.2, "top_k": 20}
    assert json.loads(library.path.read_text())["version"] == 1


def test_saving_a_preset_of_the_same_name_replaces_it(library):
    library.save_preset(ChatPreset("A", "one"))
    library.save_preset(ChatPreset("B", "two"))
    library.save_preset(ChatPreset("A", "three"))
    assert [(p.name, p.system_prompt) for p in library.presets()] == [("B", "two"), ("A", "three")]


def test_a_model_uses_its_preset_until_it_is_deleted(library, tmp_path):
    model = tmp_path / "m.gguf"
    library.save_preset(ChatPreset("Coder", "Be terse."))
    assert library.preset_for_model(model) is None
    library.use_for_model(model, "Coder")
    assert library.preset_for_model(str(model)).name == "Coder"
    library.delete_preset("Coder")
    assert library.preset_for_model(model) is None
    with pytest.raises(PresetError, match="no preset named"):
        library.use_for_model(model, "Gone")


def test_the_prompt_library_starts_with_built_ins_and_the_persons_own_follow(library):
    names = [p.name for p in library.system_prompts()]
    assert names == [name for name, _text in BUILT_IN_PROMPTS]
    library.save_system_prompt("Pirate", "Talk like a pirate.")
    library.save_system_prompt("Translator", "Into Welsh.")  # takes the built-in's place
    prompts = {p.name: p for p in library.system_prompts()}
    assert prompts["Pirate"].text == "Talk like a pirate." and not prompts["Pirate"].built_in
    assert prompts["Translator"].text == "Into Welsh."
    assert len(prompts) == len(BUILT_IN_PROMPTS) + 1
    library.delete_system_prompt("Translator")
    assert {p.name: p for p in library.system_prompts()}["Translator"].built_in


@pytest.mark.parametrize(
    "data, reason",
    [
        ("x", "should be an object"),
        ({}, "needs a name"),
        ({"name": "  \x1b "}, "A name is needed"),
        ({"name": "n" * 81}, "at most 80"),
        ({"name": "A", "system_prompt": 5}, "system prompt should be text"),
        ({"name": "A", "sampling": []}, "sampling should be an object"),
        ({"name": "A", "sampling": {"warmth": 1}}, "'warmth' is not a sampling setting"),
        ({"name": "A", "sampling": {"temperature": 9}}, "temperature should be a number from 0"),
        ({"name": "A", "sampling": {"top_k": 1.5}}, "top_k should be a whole number"),
        ({"name": "A", "load": {"n_ctx": 0}}, "context should be a whole number"),
        ({"name": "A", "load": {"n_ctx": 4096, "kv_type": "q8; rm"}}, "KV cache type"),
        ({"name": "A", "load": {"n_ctx": 4096, "engine": "vllm"}}, "engine should be one of"),
    ],
)
def test_a_preset_that_is_not_usable_is_refused_with_the_reason(data, reason):
    with pytest.raises(PresetError, match=reason):
        preset_from(data)


def test_a_bad_entry_is_skipped_and_a_damaged_file_set_aside(library):
    library.path.write_text(
        json.dumps({"presets": [{"name": "Good"}, {"name": "Bad", "sampling": {"top_p": 7}}]})
    )
    assert [p.name for p in library.presets()] == ["Good"]
    library.path.write_text("{not json")
    assert library.presets() == []
    assert library.path.with_suffix(".bad").exists()
    library.save_system_prompt("X", "y")  # the library works on from an empty file
    assert library.system_prompts()[-1].name == "X"


def test_an_empty_system_prompt_is_not_saved(library):
    with pytest.raises(PresetError, match="empty"):
        library.save_system_prompt("Nothing", "  ")


def test_load_settings_read_as_a_line():
    assert LoadSettings(8192, "q8_0").text() == "context 8,192 · KV q8_0 · llama.cpp"
    assert LoadSettings(32768, "kivi4", "rot4", "hearth").text() == (
        "context 32,768 · KV K kivi4 / V rot4 · Hearth engine"
    )
