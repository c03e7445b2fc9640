"""The app's look: Fusion, the system's palette or Hearth's light or dark one (Preferences), the
text size, a little spacing on top, and text contrast by WCAG's arithmetic.

The style sheet names palette roles (`palette(base)`) instead of colours, so it follows the
palette in use. Each palette's placeholder colour (hints, empty boxes) is made to read at WCAG AA:
Qt's own, the text at half alpha, is about 4:1 on white.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
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
    font-size: 9pt;
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
QLabel#appVersion {
    padding: 6px 18px;
}
QStatusBar QLabel {
    padding: 0 8px;
}
"""


AA_TEXT = 4.5  # WCAG 2.x level AA: the least contrast for normal-size text


def luminance(colour: QColor) -> float:
    """WCAG's relative luminance of an opaque colour."""

    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(colour.red())
        + 0.7152 * channel(colour.green())
        + 0.0722 * channel(colour.blue())
    )


def over(fg: QColor, bg: QColor) -> QColor:
    """`fg` painted over the opaque `bg` (its alpha applied)."""
    return blend(bg, QColor(fg.red(), fg.green(), fg.blue()), fg.alphaF())


def contrast(fg: QColor, bg: QColor) -> float:
    """WCAG's contrast ratio (1 to 21) of text `fg` on `bg`."""
    a, b = luminance(over(fg, bg)), luminance(bg)
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def muted_text(text: QColor, backgrounds: list[QColor], least: float = AA_TEXT + 0.1) -> QColor:
    """The quietest colour between `text` and the first background that still reads at
    `least` contrast on every one of `backgrounds`: secondary text (hints, placeholders) that
    stays legible."""
    text = over(text, backgrounds[0])
    best = text
    for step in range(1, 20):
        candidate = blend(text, backgrounds[0], step / 20)
        if min(contrast(candidate, bg) for bg in backgrounds) < least:
            break
        best = candidate
    return best


def dark_palette() -> QPalette:
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: QColor(37, 37, 40),
        QPalette.ColorRole.WindowText: QColor(232, 232, 232),
        QPalette.ColorRole.Base: QColor(28, 28, 30),
        QPalette.ColorRole.AlternateBase: QColor(44, 44, 48),
        QPalette.ColorRole.Text: QColor(232, 232, 232),
        QPalette.ColorRole.Button: QColor(52, 52, 56),
        QPalette.ColorRole.ButtonText: QColor(232, 232, 232),
        QPalette.ColorRole.Highlight: QColor(42, 110, 200),
        QPalette.ColorRole.HighlightedText: QColor(255, 255, 255),
        QPalette.ColorRole.Link: QColor(110, 170, 255),
        QPalette.ColorRole.ToolTipBase: QColor(52, 52, 56),
        QPalette.ColorRole.ToolTipText: QColor(232, 232, 232),
        QPalette.ColorRole.Mid: QColor(80, 80, 86),
        QPalette.ColorRole.Dark: QColor(20, 20, 22),
        QPalette.ColorRole.Light: QColor(70, 70, 76),
    }
    for role, colour in roles.items():
        p.setColor(role, colour)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):  # fmt: skip
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(130, 130, 136))
    return p


def themed_palette(app: QApplication, theme: str, system: QPalette) -> QPalette:
    """The palette for "system" (`system`), "light" or "dark", its placeholder text made
    legible."""
    if theme == "dark":
        palette = dark_palette()
    elif theme == "light":
        palette = app.style().standardPalette()
    else:
        palette = QPalette(system)
    # Qt's placeholder colour is the text at half alpha (about 4:1 on white): below AA.
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        backgrounds = [palette.color(group, QPalette.ColorRole.Base),
                       palette.color(group, QPalette.ColorRole.Window)]  # fmt: skip
        text = palette.color(group, QPalette.ColorRole.Text)
        palette.setColor(group, QPalette.ColorRole.PlaceholderText, muted_text(text, backgrounds))
    return palette


# The platform's palette and text size, kept before a theme or a size replaced them.
_SYSTEM_PALETTE: QPalette | None = None
_SYSTEM_POINT_SIZE = 0.0


def apply_theme(app: QApplication, theme: str = "system", text_size: int = 0) -> None:
    """Fusion with the palette of `theme` and, when `text_size` (points) is set, that font size;
    again at any time (the Preferences dialog does)."""
    global _SYSTEM_PALETTE, _SYSTEM_POINT_SIZE
    app.setStyle("Fusion")
    if _SYSTEM_PALETTE is None:
        _SYSTEM_PALETTE = QPalette(app.palette())
        _SYSTEM_POINT_SIZE = app.font().pointSizeF()
    app.setPalette(themed_palette(app, theme, _SYSTEM_PALETTE))
    font = app.font()
    font.setPointSizeF(text_size or _SYSTEM_POINT_SIZE)
    app.setFont(font)
    app.setStyleSheet(STYLE_SHEET)
