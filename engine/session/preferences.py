"""The person's preferences for the whole app: a small, versioned JSON file beside the others.

Per-model choices live in remembered.py; these apply to every model: how the window looks, how
many CPU threads the engine uses, the context a first load aims at (or "Use all of my GPU": as
much as fits), and whether the API server starts with the app. `with_preferences` is where
the engine's two reach a load.

A damaged or older file gives the defaults (a preference is a convenience; it must never keep the
app from starting), and a value out of range is replaced by its default alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from engine.files import write_json_atomic
from engine.paths import data_dir
from engine.runtime.protocol import ModelParams

PREFERENCES_VERSION = 1
THEMES = ("system", "light", "dark")
TEXT_SIZES = (0, 9, 10, 11, 12, 14, 16, 18)  # points; 0: the system's size
MAX_THREADS = 256
CONTEXTS = (0, 2048, 4096, 8192, 16384, 32768, 65536, 131072)  # 0: the load policy's default


def preferences_path() -> Path:
    return data_dir() / "preferences.json"


@dataclass(frozen=True)
class Preferences:
    theme: str = "system"
    text_size: int = 0  # points; 0: the system's
    n_threads: int = 0  # CPU threads for the engine; 0: the engine's (cpu_probe.engine_threads)
    default_context: int = 0  # tokens a first load aims at; 0: the load policy's (8,192)
    start_server: bool = False  # start the API server once the first model has loaded
    # "Use all of my GPU": a first load fills the GPU with context up to the safety margin
    # (engine/planner/fill_gpu.py) instead of aiming at default_context
    fill_gpu: bool = False

    def problems(self) -> list[str]:
        """What is out of range, in words (empty when all is well)."""
        found = []
        if self.theme not in THEMES:
            found.append(f"theme {self.theme!r} is not one of {', '.join(THEMES)}")
        if self.text_size not in TEXT_SIZES:
            found.append(f"text size {self.text_size} is not one of the sizes offered")
        if not 0 <= self.n_threads <= MAX_THREADS:
            found.append(f"{self.n_threads} CPU threads is outside 0 to {MAX_THREADS}")
        if self.default_context not in CONTEXTS:
            found.append(f"a default context of {self.default_context} is not offered")
        return found

    @property
    def target_context(self) -> int | None:
        """The load policy's `target_ctx`: None for its own default."""
        return self.default_context or None

    def with_preferences(self, params: ModelParams) -> ModelParams:
        """`params` with the engine's preferences applied (threads)."""
        return replace(params, n_threads=self.n_threads) if self.n_threads else params


def cpu_threads_available() -> int:
    return os.cpu_count() or 1


def load_preferences(path: Path | None = None) -> Preferences:
    path = path or preferences_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Preferences()
    if not isinstance(data, dict) or data.get("version") != PREFERENCES_VERSION:
        return Preferences()
    return _from_dict(data)


def _from_dict(data: dict[str, Any]) -> Preferences:
    defaults = Preferences()
    values = {}
    for f in fields(Preferences):
        kind = type(getattr(defaults, f.name))
        value = data.get(f.name, getattr(defaults, f.name))
        if type(value) is not kind:  # bool is an int subclass: compare the exact type
            value = getattr(defaults, f.name)
        values[f.name] = value
        # Each value on its own: one bad entry keeps the others.
        if Preferences(**{f.name: value}).problems():
            values[f.name] = getattr(defaults, f.name)
    return Preferences(**values)


def save_preferences(preferences: Preferences, path: Path | None = None) -> None:
    problems = preferences.problems()
    if problems:
        raise ValueError("; ".join(problems))
    write_json_atomic(path or preferences_path(), {"version": PREFERENCES_VERSION,
                                                    **asdict(preferences)})  # fmt: skip
