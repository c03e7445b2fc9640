"""Selecting part of a message's text: a read-only text view laid over the bubble under the mouse.

The transcript paints messages with a delegate (cheap for long chats), and painted text cannot be
selected. So when the mouse comes over a finished message's text, that one row gets a persistent
editor: a frameless, transparent QTextBrowser holding a copy of the very document the delegate
laid out, at the same width and place, so nothing moves; in it the person drags to select, copies
with Ctrl+C or the context menu, and clicks the transcript's own links (Copy, Thought) as before.
Only one row has it at a time, and the delegate leaves that row's text for it to draw.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QPalette, QTextDocument
from PySide6.QtWidgets import QAbstractItemView, QFrame, QTextBrowser, QTextEdit, QWidget


class MessageTextView(QTextBrowser):
    """One message's text, selectable; links are reported, never followed."""

    menu_requested = Signal(object, str)  # global position, the selected text

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("messageText")
        self.setReadOnly(True)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
            | Qt.TextInteractionFlag.LinksAccessibleByMouse
        )
        # The bubble underneath shows through: this widget only draws the text.
        self.viewport().setAutoFillBackground(False)
        self.setAutoFillBackground(False)
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.transparent)
        self.setPalette(palette)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(
            lambda pos: self.menu_requested.emit(self.mapToGlobal(pos), self.selected_text())
        )

    def show_document(self, laid_out: QTextDocument) -> None:
        """Show a copy of the delegate's document, wrapped at the same width."""
        copy = laid_out.clone(self)
        copy.setDocumentMargin(laid_out.documentMargin())
        copy.setIndentWidth(laid_out.indentWidth())
        copy.setDefaultFont(laid_out.defaultFont())
        copy.setDefaultTextOption(laid_out.defaultTextOption())
        self.setDocument(copy)
        self.setLineWrapMode(QTextEdit.LineWrapMode.FixedPixelWidth)
        self.setLineWrapColumnOrWidth(max(1, round(laid_out.textWidth())))

    def selected_text(self) -> str:
        # QTextCursor separates paragraphs with U+2029; the clipboard wants newlines.
        return self.textCursor().selectedText().replace("\u2029", "\n")


class SelectableText(QObject):
    """Which transcript row has the selectable text view (at most one)."""

    def __init__(self, view: QAbstractItemView):
        super().__init__(view)
        self._view = view
        self._open: QPersistentModelIndex | None = None

    @property
    def row(self) -> int | None:
        if self._open is None or not self._open.isValid():
            return None
        return self._open.row()

    def is_open(self, index: QModelIndex | QPersistentModelIndex) -> bool:
        return self._open is not None and self._open.isValid() and self._open == index

    def open_row(self, row: int) -> None:
        if self.row == row:
            return
        self.close()
        index = self._view.model().index(row, 0)
        if index.isValid():
            self._open = QPersistentModelIndex(index)
            self._view.openPersistentEditor(index)

    def close(self) -> None:
        if self._open is not None and self._open.isValid():
            self._view.closePersistentEditor(QModelIndex(self._open))
        self._open = None

    def editor(self) -> MessageTextView | None:
        if self._open is None or not self._open.isValid():
            return None
        widget = self._view.indexWidget(QModelIndex(self._open))
        return widget if isinstance(widget, MessageTextView) else None
