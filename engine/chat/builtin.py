"""llama.cpp's built-in chat formats: the fallback when a model's own template is missing or fails.

llama.cpp carries about fifty chat formats written in C++ (`llama_chat_apply_template`), chosen
by name ("chatml", "gemma", "llama3", ...) or recognised from a Jinja template's text by a few
telltale strings (`<|im_start|>` means ChatML). No template code runs, so they are safe for any
model. The fallback order is in `engine.chat.prompt`; this module gives the pieces:

- `builtin_template_matching(source)`: the built-in format llama.cpp recognises in a model's
  template text, if any; the best fallback when the template exists but fails to render.
- `builtin_template_for(architecture, model_name)`: a best guess from the GGUF's metadata when
  the model has no template at all.
- `apply_builtin_template(name, messages)`: format a conversation with one of them, and
  `apply_matching_builtin(source, messages)` with the one recognised in a template's text.

The calls into llama.cpp live at its boundary (engine/llama/templates.py), which imports llama_cpp
only when called, so the rest of engine.chat can be used without the compiled engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.errors import ChatTemplateError, builtin_failure
from engine.llama.templates import apply_template, builtin_names

DEFAULT_BUILTIN = "chatml"

# `general.architecture` -> built-in format, for families whose architecture settles the format.
_BY_ARCHITECTURE = {
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "gemma3n": "gemma",
    "qwen": "chatml",
    "qwen2": "chatml",
    "qwen2moe": "chatml",
    "qwen2vl": "chatml",
    "qwen3": "chatml",
    "qwen3moe": "chatml",
    "qwen3next": "chatml",
    "qwen3vl": "chatml",
    "qwen3vlmoe": "chatml",
    "smollm3": "chatml",
    "phi3": "phi3",
    "phimoe": "phi3",
    "llama": "llama3",  # also Mistral 7B, TinyLlama, SmolLM2...: the model name decides first
    "llama4": "llama4",
    "mistral3": "mistral-v7-tekken",
    "command-r": "command-r",
    "cohere2": "command-r",
    "deepseek": "deepseek2",  # DeepSeek LLM chat: "User: ...\n\nAssistant:"
    "deepseek2": "deepseek3",  # V3 and R1; V2 differs, and its GGUFs carry a template
    "chatglm": "chatglm4",
    "glm4": "chatglm4",
    "granite": "granite",
    "granitemoe": "granite",
    "granitehybrid": "granite-4.0",
    "exaone": "exaone3",
    "exaone4": "exaone4",
    "exaone-moe": "exaone-moe",
    "orion": "orion",
    "rwkv6": "rwkv-world",
    "rwkv6qwen2": "rwkv-world",
    "rwkv7": "rwkv-world",
    "bailingmoe": "bailing",
    "bailingmoe2": "bailing2",
    "hunyuan-moe": "hunyuan-moe",
    "hunyuan-dense": "hunyuan-dense",
    "gpt-oss": "gpt-oss",
    "seed_oss": "seed_oss",
    "grok": "grok-2",
    "pangu-embedded": "pangu-embedded",
}

# Words in `general.name` that settle the format whatever the architecture (fine-tunes keep their
# base architecture but not always its format). Checked in order, on the lower-cased name with
# spaces, dots and underscores turned into hyphens.
_BY_NAME = (
    ("smollm", "chatml"),
    ("qwen", "chatml"),
    ("hermes", "chatml"),
    ("dolphin", "chatml"),
    ("tinyllama", "zephyr"),
    ("zephyr", "zephyr"),
    ("llama-4", "llama4"),
    ("llama-3", "llama3"),
    ("llama3", "llama3"),
    ("llama-2", "llama2-sys"),
    ("llama2", "llama2-sys"),
    ("mixtral", "mistral-v1"),
    ("mistral", "mistral-v3"),
    ("vicuna", "vicuna"),
    ("openchat", "openchat"),
    ("deepseek-coder", "deepseek"),
    ("falcon3", "falcon3"),
    ("falcon-3", "falcon3"),
    ("phi-4", "phi4"),
    ("phi4", "phi4"),
    ("phi-3", "phi3"),
    ("phi3", "phi3"),
    ("gemma", "gemma"),
    ("granite", "granite"),
    ("minicpm", "minicpm"),
)

# A conversation that tells the formats apart: a system turn, two user turns, whitespace to trim.
_PROBE = (
    ("system", " probe-system "),
    ("user", " probe-user-1 "),
    ("assistant", " probe-assistant "),
    ("user", " probe-user-2 "),
)


def builtin_template_names() -> list[str]:
    """The names llama.cpp knows, e.g. ["bailing", ..., "chatml", ..., "zephyr"]."""
    return list(builtin_names())


def builtin_template_for(architecture: str | None, model_name: str | None = None) -> str:
    """The built-in format to use for a model with no chat template, from its GGUF metadata
    (`general.architecture`, `general.name`). A best guess; "chatml" when nothing is known."""
    return builtin_choice(architecture, model_name)[0]


def builtin_choice(architecture: str | None, model_name: str | None = None) -> tuple[str, str]:
    """`builtin_template_for`'s answer, and why, e.g. ("gemma", "for the 'gemma3' architecture")."""
    if model_name:
        words = model_name.lower()
        for separator in " ._":
            words = words.replace(separator, "-")
        for hint, name in _BY_NAME:
            if hint in words:
                return name, f"from the model's name ('{model_name}')"
    name = _BY_ARCHITECTURE.get((architecture or "").lower())
    if name is not None:
        return name, f"for the '{architecture}' architecture"
    return DEFAULT_BUILTIN, "the default"


def builtin_template_matching(source: str) -> str | None:
    """The built-in format llama.cpp recognises in a Jinja template's text, or None.

    llama.cpp picks the format by looking for telltale strings; it does not say which it
    picked, so each built-in is tried on a probe conversation and the one that formats it
    exactly as the template text does is the answer.
    """
    target = apply_template(source.encode("utf-8", "replace"), _PROBE, True)
    if target is None:
        return None
    for name in builtin_names():
        if apply_template(name.encode(), _PROBE, True) == target:
            return name
    return None


def apply_matching_builtin(
    source: str, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True
) -> tuple[str, str] | None:
    """(prompt, name): `messages` formatted by the built-in format llama.cpp recognises in the
    template text `source`, or None when it recognises none. Formatting goes through llama.cpp's
    own recognition, so the prompt is exactly what llama.cpp would make; `name` is for display."""
    name = builtin_template_matching(source)
    if name is None:
        return None
    turns = [_turn(message) for message in messages]
    prompt = apply_template(source.encode("utf-8", "replace"), turns, add_generation_prompt)
    return (prompt, name) if prompt is not None else None


def apply_builtin_template(
    name: str, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True
) -> str:
    """Format `messages` with the built-in format `name` (one of `builtin_template_names()`)."""
    if name not in builtin_names():
        raise ChatTemplateError(
            f"There is no built-in chat format called '{name}'. "
            f"Choose one of: {', '.join(builtin_names())}.",
            reason=f"there is no built-in chat format called '{name}'",
            kind="builtin",
        )
    turns = [_turn(message) for message in messages]
    result = apply_template(name.encode(), turns, add_generation_prompt)
    if result is None:
        raise builtin_failure(name, "llama.cpp did not recognise it")
    return result


def _turn(message: Mapping[str, Any]) -> tuple[str, str]:
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or not isinstance(content, str):
        reason = (
            "a message's role and content must be text, not "
            f"{type(role).__name__} and {type(content).__name__}"
        )
        raise ChatTemplateError(
            f"A built-in chat format cannot format this conversation: {reason}.",
            reason=reason,
            kind="builtin",
        )
    return role, content
