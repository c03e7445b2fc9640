"""The message box: Enter sends, Shift+Enter starts a new line, and it grows with its text up to a
few lines before it scrolls."""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal
from PySide6.QtGui import QDragEnterEvent, QKeyEvent, Qt
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QSizePolicy, QWidget

MAX_VISIBLE_LINES = 6


class ChatInput(QPlainTextEdit):
    submitted = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setPlaceholderText("Message the model")
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().setDocumentMargin(8)
        self.document().contentsChanged.connect(self.updateGeometry)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        # A dropped file is a model to open, not text to paste: leave it to the main window.
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.ignore()
            return
        super().dragEnterEvent(event)

    def sizeHint(self) -> QSize:
        # QPlainTextEdit's layout measures its height in lines, wrapped lines included.
        wrapped_lines = int(self.document().documentLayout().documentSize().height())
        lines = min(MAX_VISIBLE_LINES, max(1, wrapped_lines))
        # Scroll only past the visible maximum; below it the box grows instead.
        self.setVerticalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAsNeeded
            if wrapped_lines > MAX_VISIBLE_LINES
            else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        line_height = self.fontMetrics().lineSpacing()
        margins = self.contentsMargins()
        height = (
            lines * line_height
            + 2 * int(self.document().documentMargin())
            + margins.top()
            + margins.bottom()
            + 2  # QPlainTextEdit's layout leaves a pixel of slack under the last line
        )
        return QSize(super().sizeHint().width(), height)

    def minimumSizeHint(self) -> QSize:
        # QAbstractScrollArea asks for room for both scroll bars; one line of text is enough.
        return QSize(80, self.sizeHint().height())
