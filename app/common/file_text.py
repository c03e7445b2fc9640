"""Text from model files and the Hub, shown in Qt widgets without being interpreted.

A QLabel's or a tooltip's default format is Qt's AutoText: when the first line of the text holds
a known HTML tag anywhere, Qt renders it as rich text. A GGUF named `<img src=...>` or a Hub
file `<a href=...>.gguf` would then draw pictures or links in the window, and a right-to-left
override in a name reverses the rest of the label. So text that came from a file (a model's
name, file names, header errors that quote the file, llama.cpp's lines) goes through these:

- `show_plain(label, text)`: the label set to plain text, the text through `printable_line`
  (engine.untrusted_text: controls, bidi and format characters shown as escapes);
- `rich_escape(text)`: for a label that is rich text on purpose (it holds a link of our own);
- `plain_tooltip(*lines)`: a tooltip whose lines are shown as written.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from engine.untrusted_text import printable_line


def show_plain(label: QLabel, text: str) -> None:
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(printable_line(text))


def rich_escape(text: str) -> str:
    return html.escape(printable_line(text), quote=False)


def plain_tooltip(*lines: str) -> str:
    """Rich text made of escaped lines: `<qt>` makes Qt take it as rich text whatever it holds,
    so nothing in the lines can change how it is read."""
    return "<qt>" + "<br>".join(rich_escape(line) for line in lines) + "</qt>"
