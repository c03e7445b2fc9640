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


def test_serve_help_names_the_default_port(capsys):
    from engine.server.config import DEFAULT_PORT

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert f"(default: {DEFAULT_PORT})" in capsys.readouterr().out


def test_every_command_prints_its_help(capsys):
    """Each command's --help renders: argparse formats help texts with %, so a bare % in one
    (a margin "4% of the card") is a TypeError rather than help."""
    from engine.cli import SUBCOMMANDS

    for name in SUBCOMMANDS:
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0, name
        assert "usage: hearth " + name in capsys.readouterr().out


def test_info_on_a_missing_local_file_does_not_blame_the_network(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing.gguf")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "network" not in err
