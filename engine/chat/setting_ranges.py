"""The values each chat setting may take: what a conversation's settings, a preset or a chat
file may hold, checked before the chat page puts them in its boxes (the same ranges as those
boxes, and the sampling ranges a model's header is held to)."""

from __future__ import annotations

import math
from typing import Any

from engine.chat.sampling_defaults import SAMPLING_KEYS

RANDOM_SEED = -1
MAX_REPLY_TOKENS = 131072

# setting -> (int or float, lowest, highest)
NUMBER_SETTINGS: dict[str, tuple[type, float, float]] = {
    setting: (kind, low, high) for setting, kind, low, high in SAMPLING_KEYS.values()
}
NUMBER_SETTINGS["seed"] = (int, RANDOM_SEED, 2**31 - 1)
NUMBER_SETTINGS["max_tokens"] = (int, 1, MAX_REPLY_TOKENS)
TEXT_SETTINGS = ("system_prompt", "preset", "overflow")


def setting_problem(name: str, value: Any) -> str | None:
    """What `value` should be to be chat setting `name`; None when it is fine (or `name` is
    not a setting Hearth knows, which is kept as it is)."""
    if name in TEXT_SETTINGS:
        return None if isinstance(value, str) else "text"
    if name not in NUMBER_SETTINGS:
        return None
    kind, low, high = NUMBER_SETTINGS[name]
    is_int = isinstance(value, int) and not isinstance(value, bool)
    ok = is_int or (kind is float and isinstance(value, float) and math.isfinite(value))
    if ok and low <= value <= high:
        return None
    what = "a whole number" if kind is int else "a number"
    return f"{what} from {low:g} to {high:g}"
