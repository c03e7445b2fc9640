"""Where the library lives and whether Hearth may go online: a small, versioned JSON file.

The models folder defaults to `<data folder>/models` (engine/paths.py says where that is).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from engine.files import write_json_atomic
from engine.paths import data_dir

SETTINGS_VERSION = 1


@dataclass(frozen=True)
class HubSettings:
    models_dir: Path
    offline: bool = False  # True: no Hub calls; the Library shows local models only
    scan_hf_cache: bool = True  # list GGUFs already in huggingface_hub's cache too

    @property
    def quarantine_dir(self) -> Path:
        return self.models_dir / ".quarantine"

    @classmethod
    def default(cls) -> HubSettings:
        return cls(models_dir=data_dir() / "models")

    def with_models_dir(self, folder: str | Path) -> HubSettings:
        return replace(self, models_dir=Path(folder).expanduser())


def settings_path() -> Path:
    return data_dir() / "hub_settings.json"


def load_settings(path: Path | None = None) -> HubSettings:
    """The saved settings; defaults when there are none or the file is unreadable (a broken
    settings file must not keep the app from starting)."""
    path = path or settings_path()
    defaults = HubSettings.default()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return defaults
    if not isinstance(data, dict) or data.get("version") != SETTINGS_VERSION:
        return defaults
    folder = data.get("models_dir")
    return HubSettings(
        models_dir=Path(folder) if isinstance(folder, str) and folder else defaults.models_dir,
        offline=bool(data.get("offline", False)),
        scan_hf_cache=bool(data.get("scan_hf_cache", True)),
    )


def save_settings(settings: HubSettings, path: Path | None = None) -> None:
    path = path or settings_path()
    data = {
        "version": SETTINGS_VERSION,
        "models_dir": str(settings.models_dir),
        "offline": settings.offline,
        "scan_hf_cache": settings.scan_hf_cache,
    }
    write_json_atomic(path, data)
