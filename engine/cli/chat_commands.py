"""What `hearth chat` understands at its prompt besides messages: /help, /exit (/quit), and
the ways out (Ctrl+D, Ctrl+C), said once when the chat starts.

A line that is one of these words is a command, never sent to the model; a lone "/word" that is
not one is answered as an unknown command (a typo must not become a message); any other line,
a path such as /etc/hosts included, is a message.
"""

from __future__ import annotations

import re

HELP = "help"
EXIT = "exit"
UNKNOWN = "unknown"

WELCOME = "Type a message and press Enter. /help lists the commands; /exit or Ctrl+D leaves."
HELP_TEXT = """\
Commands:
  /help         this list
  /exit, /quit  leave (Ctrl+D does too)
Ctrl+C stops a reply while it is being written; at the prompt it leaves."""

_COMMANDS = {"/help": HELP, "/?": HELP, "/exit": EXIT, "/quit": EXIT, "/bye": EXIT}
_COMMAND_LIKE = re.compile(r"/[A-Za-z]+")


def chat_command(line: str) -> str | None:
    """HELP, EXIT or UNKNOWN when `line` is meant as a command, else None (a message)."""
    word = line.strip().lower()
    if word in _COMMANDS:
        return _COMMANDS[word]
    return UNKNOWN if _COMMAND_LIKE.fullmatch(word) else None
