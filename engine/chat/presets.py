"""Chat presets and the system prompt library, kept in one small JSON file beside the other
settings (chat-presets.json in Hearth's data folder, written atomically).

A preset is a named bundle of what a chat starts from: a system prompt, sampling (only the
values it sets), and optionally how the model is loaded (context, KV cache types, engine). A
preset can be the one for a model file: a new chat with that model starts from it. The load
part is handed to the model's remembered load settings (engine/session/remembered.py) by the
window, so the load policy still checks that it fits.

    library = PresetLibrary()
    library.save_preset(ChatPreset("Terse coder", "Be terse.", {"temperature": 0.2}))
    library.use_for_model("/models/qwen.gguf", "Terse coder")
    library.preset_for_model("/models/qwen.gguf").chat_settings()

A damaged file is set aside (renamed .bad) rather than failing, and an entry that is not a
usable preset is skipped: presets are a convenience, never a reason a chat cannot start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.chat.setting_ranges import NUMBER_SETTINGS, setting_problem
from engine.files import write_json_atomic
from engine.paths import data_dir

FILE_VERSION = 1
MAX_NAME_CHARS = 80
MAX_PROMPT_CHARS = 100_000
MAX_CONTEXT = 1 << 24
ENGINES = ("llama", "hearth")  # as RememberedChoice names them

# A few prompts to start the library with; the person's own come after them (and one of the
# same name takes its place).
BUILT_IN_PROMPTS: tuple[tuple[str, str], ...] = (
    ("Concise assistant", "You are a helpful assistant. Answer briefly and directly."),
    (
        "Code reviewer",
        "You review code. Point out bugs, unclear names and missing tests first, then style. "
        "Quote the lines you mean.",
    ),
    (
        "Translator",
        "Translate what I write into English. If it is already English, translate it into "
        "French. Give only the translation.",
    ),
    (
        "Tutor",
        "You are a patient tutor. Ask one question at a time and let me find the answer; "
        "explain only when I am stuck.",
    ),
)


class PresetError(ValueError):
    """A preset or prompt that cannot be saved; the message says why."""


def clean_name(name: str) -> str:
    """A preset's or prompt's name: one line, not empty, not too long."""
    line = " ".join("".join(c for c in name if c.isprintable()).split())
    if not line:
        raise PresetError("A name is needed.")
    if len(line) > MAX_NAME_CHARS:
        raise PresetError(f"A name may have at most {MAX_NAME_CHARS} characters.")
    return line


@dataclass(frozen=True)
class SystemPrompt:
    name: str
    text: str
    built_in: bool = False


@dataclass(frozen=True)
class LoadSettings:
    """How the model is loaded under a preset (None: as it is)."""

    n_ctx: int
    kv_type: str = "f16"  # the K cache's type, and V's unless type_v says otherwise
    type_v: str | None = None
    engine: str = "llama"

    def text(self) -> str:
        """ "context 8,192 · KV q8_0 · llama.cpp" """
        v = self.type_v or self.kv_type
        kv = self.kv_type if v == self.kv_type else f"K {self.kv_type} / V {v}"
        engine = "Hearth engine" if self.engine == "hearth" else "llama.cpp"
        return f"context {self.n_ctx:,} · KV {kv} · {engine}"


@dataclass(frozen=True)
class ChatPreset:
    name: str
    system_prompt: str = ""
    sampling: Mapping[str, float | int] = field(default_factory=dict)  # NUMBER_SETTINGS only
    load: LoadSettings | None = None

    def chat_settings(self) -> dict[str, Any]:
        """What the preset sets in a chat's settings (the system prompt always)."""
        return {"system_prompt": self.system_prompt, **self.sampling}

    def to_dict(self) -> dict[str, Any]:
        load = None
        if self.load is not None:
            load = {
                "n_ctx": self.load.n_ctx,
                "kv_type": self.load.kv_type,
                "type_v": self.load.type_v,
                "engine": self.load.engine,
            }
        return {
            "name": self.name,
            "system_prompt": self.system_prompt,
            "sampling": dict(self.sampling),
            "load": load,
        }


def preset_from(data: Any) -> ChatPreset:
    """A preset from its stored (or typed) form; PresetError says what is wrong with it."""
    if not isinstance(data, dict):
        raise PresetError("A preset should be an object.")
    name = data.get("name")
    if not isinstance(name, str):
        raise PresetError("A preset needs a name.")
    name = clean_name(name)
    prompt = data.get("system_prompt", "")
    if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT_CHARS:
        raise PresetError(f"“{name}”: the system prompt should be text of at most "
                          f"{MAX_PROMPT_CHARS:,} characters.")  # fmt: skip
    sampling = data.get("sampling", {})
    if not isinstance(sampling, dict):
        raise PresetError(f"“{name}”: sampling should be an object.")
    for key, value in sampling.items():
        if key not in NUMBER_SETTINGS:
            raise PresetError(f"“{name}”: {key!r} is not a sampling setting.")
        problem = setting_problem(key, value)
        if problem is not None:
            raise PresetError(f"“{name}”: {key} should be {problem}.")
    load = data.get("load")
    return ChatPreset(
        name, prompt, dict(sampling), None if load is None else _load_from(load, name)
    )


def _load_from(data: Any, name: str) -> LoadSettings:
    if not isinstance(data, dict):
        raise PresetError(f"“{name}”: load settings should be an object.")
    n_ctx, kv_type = data.get("n_ctx"), data.get("kv_type", "f16")
    type_v, engine = data.get("type_v"), data.get("engine", "llama")
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or not 0 < n_ctx <= MAX_CONTEXT:
        raise PresetError(f"“{name}”: the context should be a whole number of tokens.")
    for value in (kv_type, type_v):
        if value is not None and not (isinstance(value, str) and value.isidentifier()):
            raise PresetError(f"“{name}”: a KV cache type should be a name such as q8_0.")
    if engine not in ENGINES:
        raise PresetError(f"“{name}”: the engine should be one of {', '.join(ENGINES)}.")
    return LoadSettings(n_ctx, kv_type, type_v, engine)


def default_presets_path() -> Path:
    return data_dir() / "chat-presets.json"


class PresetLibrary:
    """The presets, the system prompt library and which preset each model file uses."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_presets_path()

    # -- system prompts -------------------------------------------------------------------------

    def system_prompts(self) -> list[SystemPrompt]:
        own = {}
        for item in self._read()["system_prompts"]:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                try:
                    own[clean_name(str(item.get("name", "")))] = item["text"]
                except PresetError:
                    continue
        built_in = [SystemPrompt(n, t, True) for n, t in BUILT_IN_PROMPTS if n not in own]
        return built_in + [SystemPrompt(n, t) for n, t in own.items()]

    def save_system_prompt(self, name: str, text: str) -> SystemPrompt:
        name = clean_name(name)
        if not text.strip():
            raise PresetError("The system prompt is empty: write one first.")
        if len(text) > MAX_PROMPT_CHARS:
            raise PresetError(f"A system prompt may have at most {MAX_PROMPT_CHARS:,} characters.")
        data = self._read()
        kept = [p for p in data["system_prompts"] if not _named(p, name)]
        data["system_prompts"] = [*kept, {"name": name, "text": text}]
        self._write(data)
        return SystemPrompt(name, text)

    def delete_system_prompt(self, name: str) -> None:
        data = self._read()
        data["system_prompts"] = [p for p in data["system_prompts"] if not _named(p, name)]
        self._write(data)

    # -- presets --------------------------------------------------------------------------------

    def presets(self) -> list[ChatPreset]:
        found = {}
        for item in self._read()["presets"]:
            try:
                preset = preset_from(item)
            except PresetError:
                continue  # hand-edited, or from a newer Hearth: skipped, not fatal
            found[preset.name] = preset
        return list(found.values())

    def preset(self, name: str) -> ChatPreset | None:
        return next((p for p in self.presets() if p.name == name), None)

    def save_preset(self, preset: ChatPreset) -> ChatPreset:
        """Add `preset`, or replace the one of its name; checked as a stored one would be."""
        preset = preset_from(preset.to_dict())
        data = self._read()
        kept = [p for p in data["presets"] if not _named(p, preset.name)]
        data["presets"] = [*kept, preset.to_dict()]
        self._write(data)
        return preset

    def delete_preset(self, name: str) -> None:
        data = self._read()
        data["presets"] = [p for p in data["presets"] if not _named(p, name)]
        data["models"] = {k: v for k, v in data["models"].items() if v != name}
        self._write(data)

    # -- per model ------------------------------------------------------------------------------

    def preset_for_model(self, model_path: str | Path) -> ChatPreset | None:
        name = self._read()["models"].get(_model_key(model_path))
        return self.preset(name) if isinstance(name, str) else None

    def use_for_model(self, model_path: str | Path, name: str | None) -> None:
        """New chats with `model_path` start from preset `name` (None: from no preset)."""
        data = self._read()
        if name is None:
            data["models"].pop(_model_key(model_path), None)
        else:
            if self.preset(name) is None:
                raise PresetError(f"There is no preset named “{name}”.")
            data["models"][_model_key(model_path)] = name
        self._write(data)

    # -- the file -------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        empty: dict[str, Any] = {"system_prompts": [], "presets": [], "models": {}}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return empty
        except (OSError, ValueError):
            self.path.replace(self.path.with_suffix(".bad"))
            return empty
        if not isinstance(data, dict):
            return empty
        return {
            "system_prompts": _list(data.get("system_prompts")),
            "presets": _list(data.get("presets")),
            "models": data["models"] if isinstance(data.get("models"), dict) else {},
        }

    def _write(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.path, {"version": FILE_VERSION, **data})


def _named(item: Any, name: str) -> bool:
    return isinstance(item, dict) and item.get("name") == name


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _model_key(model_path: str | Path) -> str:
    return str(Path(model_path).resolve())
