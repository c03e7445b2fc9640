"""Where Hearth keeps its files for this user: one data folder for everything it writes.

HEARTH_DATA_DIR overrides it (tests, portable installs); otherwise the platform's per-user data
folder: $XDG_DATA_HOME/hearth (~/.local/share/hearth) on Linux, ~/Library/Application
Support/Hearth on macOS, %LOCALAPPDATA%\\Hearth on Windows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def data_dir() -> Path:
    override = os.environ.get("HEARTH_DATA_DIR")
    if override:
        return Path(override)
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "Hearth"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Hearth"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "hearth"
