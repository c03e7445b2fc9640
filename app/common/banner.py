"""An inline message strip across the top of a page: information, an error, or an engine crash.

Inline rather than a modal QMessageBox, so the window stays usable (and testable) while it shows,
and a crash report can carry the engine's last lines in a collapsible monospace box.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontDatabase, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import order_window_tabs
from app.common.theme import blend
from engine.untrusted_text import printable_line, printable_text

INFO = "info"
ERROR = "error"

_TINTS = {INFO: QColor(40, 120, 220), ERROR: QColor(215, 55, 55)}


class Banner(QFrame):
    """Hidden until `show_message`; the close button hides it again."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.Shape.NoFrame)
        # Set explicitly: a banner inside a Base-coloured page would inherit Base otherwise.
        self.setBackgroundRole(QPalette.ColorRole.Window)
        self.setAutoFillBackground(True)
        self._kind = INFO

        self._title = QLabel()
        self._title.setObjectName("bannerTitle")
        self._title.setWordWrap(True)
        self._title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._title.setTextFormat(Qt.TextFormat.PlainText)  # messages quote file names and text
        font = self._title.font()
        font.setBold(True)
        self._title.setFont(font)
        self._text = QLabel()
        self._text.setObjectName("bannerText")
        self._text.setWordWrap(True)
        self._text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._text.setTextFormat(Qt.TextFormat.PlainText)

        self._details_toggle = QToolButton()
        self._details_toggle.setObjectName("bannerDetailsToggle")
        self._details_toggle.setCheckable(True)
        self._details_toggle.setAutoRaise(True)
        self._details_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self._details_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self._details_toggle.toggled.connect(self._show_details)
        self._details = QPlainTextEdit()
        self._details.setObjectName("bannerDetails")
        self._details.setReadOnly(True)
        self._details.setAccessibleName("Details")
        self._details.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._details.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self._details.setMaximumHeight(180)
        self._details.hide()

        self._actions = QHBoxLayout()
        self._actions.setSpacing(6)
        close = QToolButton()
        close.setObjectName("bannerClose")
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.setAccessibleName("Dismiss")
        close.clicked.connect(self.hide)

        top = QHBoxLayout()
        texts = QVBoxLayout()
        texts.setSpacing(2)
        texts.addWidget(self._title)
        texts.addWidget(self._text)
        top.addLayout(texts, 1)
        top.addLayout(self._actions)
        top.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 10, 10)
        layout.setSpacing(6)
        layout.addLayout(top)
        layout.addWidget(self._details_toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self._details)
        self.hide()

    @property
    def kind(self) -> str:
        return self._kind

    def title(self) -> str:
        return self._title.text()

    def text(self) -> str:
        return self._text.text()

    def details(self) -> str:
        return self._details.toPlainText()

    def action_buttons(self) -> list[QPushButton]:
        return [
            self._actions.itemAt(i).widget()
            for i in range(self._actions.count())
            if isinstance(self._actions.itemAt(i).widget(), QPushButton)
        ]

    def show_message(
        self,
        kind: str,
        title: str,
        text: str = "",
        *,
        details: Sequence[str] = (),
        details_label: str = "Show details",
        actions: Sequence[tuple[str, Callable[[], None]]] = (),
    ) -> None:
        self._kind = kind
        self._title.setText(printable_line(title))
        self._text.setText(printable_text(text))
        self._text.setVisible(bool(text))
        self._details.setPlainText("\n".join(details))
        self._details_toggle.setText(details_label)
        self._details_toggle.setVisible(bool(details))
        self._details_toggle.setChecked(False)
        self._show_details(False)
        while self._actions.count():
            widget = self._actions.takeAt(0).widget()
            if widget is not None:
                widget.deleteLater()
        for label, callback in actions:
            button = QPushButton(label)
            button.clicked.connect(callback)
            self._actions.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
        self._apply_palette()
        order_window_tabs(self)  # the new buttons where they show, not last in the window
        self.show()

    def _show_details(self, shown: bool) -> None:
        self._details.setVisible(shown)
        self._details_toggle.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )
        if shown:
            bar = self._details.verticalScrollBar()
            bar.setValue(bar.maximum())  # the last lines matter most

    def _apply_palette(self) -> None:
        palette = self.palette()
        base = (
            self.window().palette().color(QPalette.ColorRole.Window)
            if self.window()
            else (palette.color(QPalette.ColorRole.Window))
        )
        palette.setColor(QPalette.ColorRole.Window, blend(base, _TINTS[self._kind], 0.16))
        self.setPalette(palette)
