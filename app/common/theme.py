"""The app's look: Fusion, the system's palette (light or dark), a little spacing on top.

The style sheet names palette roles (`palette(base)`) instead of colours, so it follows whichever
palette the platform gives, including a switch to dark mode while the app runs.
"""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication


def blend(a: QColor, b: QColor, amount: float) -> QColor:
    """`a` moved `amount` (0..1) of the way towards `b`."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


STYLE_SHEET = """
QListWidget#navigation {
    border: none;
    background: palette(window);
    padding: 4px 8px;
    font-size: 11pt;
    outline: 0;
}
QLabel#appTitle {
    font-size: 14pt;
    font-weight: bold;
    padding: 14px 18px 6px 18px;
}
QListWidget#navigation::item {
    padding: 8px 12px;
    border-radius: 6px;
    margin: 1px 0;
}
QListWidget#navigation::item:selected {
    background: palette(highlight);
    color: palette(highlighted-text);
}
QListView#transcript {
    background: palette(base);
}
QLabel#composerHint {
    color: palette(placeholder-text);
    font-size: 8pt;
}
QPushButton#newChatButton {
    font-size: 8pt;
    padding: 2px 6px;
}
QFrame#composer {
    background: palette(base);
    border: 1px solid palette(mid);
    border-radius: 10px;
}
QPlainTextEdit#chatInput {
    background: transparent;
}
QPushButton#sendButton, QPushButton#stopButton {
    min-width: 72px;
    padding: 5px 12px;
    border-radius: 6px;
    border: 1px solid palette(mid);
    background: palette(button);
}
QPushButton#sendButton:enabled {
    background: palette(highlight);
    color: palette(highlighted-text);
    border-color: palette(highlight);
}
QPushButton#sendButton:disabled, QPushButton#stopButton:disabled {
    color: palette(placeholder-text);
}
QPushButton#jumpToLatest {
    padding: 5px 14px;
    border-radius: 13px;
    border: 1px solid palette(highlight);
    background: palette(highlight);
    color: palette(highlighted-text);
}
QStatusBar QLabel {
    padding: 0 8px;
}
"""


def apply_theme(app: QApplication) -> None:
    app.setStyle("Fusion")
    app.setStyleSheet(STYLE_SHEET)
