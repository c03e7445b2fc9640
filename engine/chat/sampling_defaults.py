"""The sampling a model's authors recommend, when its GGUF says so (`general.sampling.*`, written
by llama.cpp's converter from the model's generation_config.json): what a new chat with that
model starts from, before the person changes anything.

Values out of their sensible ranges are left out rather than trusted: the header is data from a
file, and a chat must not start at temperature 1e9.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# GGUF key -> chat setting, with the range a value must be in to be used
SAMPLING_KEYS: dict[str, tuple[str, type, float, float]] = {
    "general.sampling.temp": ("temperature", float, 0.0, 2.0),
    "general.sampling.top_p": ("top_p", float, 0.0, 1.0),
    "general.sampling.top_k": ("top_k", int, 0, 1000),
    "general.sampling.min_p": ("min_p", float, 0.0, 1.0),
    "general.sampling.penalty_repeat": ("repeat_penalty", float, 0.5, 2.0),
}
HEADER_DEADLINE_S = 2.0


def sampling_defaults(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The chat settings a header recommends (only those it sets, in range)."""
    found: dict[str, Any] = {}
    for key, (setting, kind, low, high) in SAMPLING_KEYS.items():
        value = metadata.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if low <= value <= high:
            found[setting] = round(float(value), 4) if kind is float else int(value)
    return found


def model_sampling_defaults(path: str | Path) -> dict[str, Any]:
    """`sampling_defaults` of the GGUF at `path`; {} when its header cannot be read (the chat
    then starts from Hearth's own defaults)."""
    from engine.gguf import GGUFError, read_model_info

    try:
        info = read_model_info(str(path), deadline_s=HEADER_DEADLINE_S)
    except (GGUFError, OSError, ValueError):
        return {}
    return sampling_defaults(info.metadata)
