"""The user guide names the file the remembered model settings are really written to."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.session.remembered import default_settings_path

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "chat-and-settings.md"


@pytest.mark.skipif(sys.platform != "linux", reason="the guide shows the Linux path")
def test_the_guide_names_the_real_settings_file(monkeypatch, tmp_path):
    monkeypatch.delenv("HEARTH_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    real = default_settings_path()
    shown = "~/" + str(real.relative_to(tmp_path))
    guide = " ".join(GUIDE.read_text(encoding="utf-8").split())
    assert f"`{shown}`" in guide
    assert "~/.config/hearth" not in guide  # where it never was
