"""Load settings remembered per model file: one small JSON file, keyed by the model's full path.

A damaged file is set aside (renamed *.bad) rather than failing the panel: settings are a
convenience, and the planner's best fit is always there to start from again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.paths import data_dir


def default_settings_path() -> Path:
    return data_dir() / "model-settings.json"


class ModelSettingsStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            self.path.replace(self.path.with_suffix(".bad"))
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, model_path: str | Path) -> dict[str, Any] | None:
        value = self._read().get(str(Path(model_path).resolve()))
        return value if isinstance(value, dict) else None

    def put(self, model_path: str | Path, settings: dict[str, Any]) -> None:
        data = self._read()
        data[str(Path(model_path).resolve())] = settings
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a crash mid-write never leaves half a file.
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        partial.replace(self.path)
