"""The remote server the chat used last: its address and model, in remote-engine.json in
Hearth's data folder (the key is in the keyring: engine/remote/keys.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.files import write_json_atomic
from engine.paths import data_dir


@dataclass(frozen=True)
class RemoteChoice:
    base_url: str
    model: str


def default_choice_path() -> Path:
    return data_dir() / "remote-engine.json"


def load_choice(path: Path | None = None) -> RemoteChoice | None:
    path = path or default_choice_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    url, model = data.get("base_url"), data.get("model")
    if isinstance(url, str) and isinstance(model, str) and url and model:
        return RemoteChoice(url, model)
    return None


def save_choice(choice: RemoteChoice, path: Path | None = None) -> None:
    write_json_atomic(
        path or default_choice_path(),
        {"version": 1, "base_url": choice.base_url, "model": choice.model},
    )
