"""`hearth chat`'s prompt: /help and /exit are commands, said at the start; other lines are
messages. The end-to-end test drives the real command with the starter model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.cli.chat_commands import EXIT, HELP, HELP_TEXT, UNKNOWN, WELCOME, chat_command
from engine.starter_model import starter_model_path


@pytest.mark.parametrize(
    "line, command",
    [
        ("/help", HELP),
        ("  /HELP  ", HELP),
        ("/?", HELP),
        ("/exit", EXIT),
        ("/quit", EXIT),
        ("/hlep", UNKNOWN),  # a typo is not sent to the model
        ("/etc/hosts", None),  # a path is a message
        ("what does /exit do?", None),
        ("hello", None),
    ],
)
def test_which_lines_are_commands(line, command):
    assert chat_command(line) == command


def test_the_prompt_says_how_to_leave():
    assert "/exit" in WELCOME and "Ctrl+D" in WELCOME and "/help" in WELCOME
    assert "/exit" in HELP_TEXT and "Ctrl+C" in HELP_TEXT


@pytest.mark.skipif(starter_model_path() is None, reason="the starter model is not installed")
def test_help_and_exit_are_answered_without_asking_the_model():
    done = subprocess.run(
        [sys.executable, "-m", "app.launcher", "chat", "--max-tokens", "4"],
        input="/help\n/nope\n/exit\nthis line is never read\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert WELCOME in done.stderr
    assert HELP_TEXT in done.stderr
    assert "/nope is not a command" in done.stderr
    # Nothing was generated: the only stdout is the prompts input() wrote.
    assert done.stdout.replace("> ", "").strip() == ""
