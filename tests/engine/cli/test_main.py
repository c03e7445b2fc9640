"""`hearth --version` and `hearth --help`: what the command line says about itself."""

from __future__ import annotations

import pytest

from app.launcher import main
from engine.cli import hearth_version


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"hearth {hearth_version()}"
    assert hearth_version()[0].isdigit()  # installed (editable) in the test environment


def test_help_says_no_command_opens_the_window_and_documents_model(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "hearth --model PATH" in text
    assert "None of the commands above opens the window" in text
    for command in ("chat", "info", "hw", "plan", "bench"):
        assert f"    {command} " in text
