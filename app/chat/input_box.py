"""The message box: Enter sends, Shift+Enter starts a new line, and it grows with its text up to a
few lines before it scrolls. Images dropped on it (image files) or pasted into it become
attachments of the next message (attachments.py); other files dropped on it are left to the
main window, which opens them as models."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QSize, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QImage, QKeyEvent, Qt
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QSizePolicy, QWidget

from app.chat.attachments import attachment_from_file, attachment_from_image, is_image_file
from engine.chat.images import ImageRefused

MAX_VISIBLE_LINES = 6


def image_files(mime: QMimeData) -> list[str]:
    """The local image files a drop or paste carries, when it carries only those."""
    paths = [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]
    return paths if paths and all(is_image_file(path) for path in paths) else []


class ChatInput(QPlainTextEdit):
    submitted = Signal()
    attached = Signal(object)  # an Attachment made from a dropped or pasted image
    refused = Signal(str)  # why an image was not taken, and what to do

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
        if image_files(event.mimeData()) or event.mimeData().hasImage():
            event.acceptProposedAction()
            return
        # Any other file is a model to open, not text to paste: leave it to the main window.
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.ignore()
            return
        super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if image_files(event.mimeData()) or event.mimeData().hasImage():
            event.acceptProposedAction()
            return
        super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        if self.take_images(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dropEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return (
            bool(image_files(source)) or source.hasImage() or super().canInsertFromMimeData(source)
        )

    def insertFromMimeData(self, source: QMimeData) -> None:
        if not self.take_images(source):
            super().insertFromMimeData(source)

    def take_images(self, mime: QMimeData) -> bool:
        """Make attachments of the images `mime` carries (files, or a picture); True if it
        carried any. Each image taken is `attached`; each refused says why (`refused`)."""
        files = image_files(mime)
        if not files and not mime.hasImage():
            return False
        if files:
            for path in files:
                self._attach(lambda path=path: attachment_from_file(path))
        else:
            self._attach(lambda: attachment_from_image(QImage(mime.imageData())))
        return True

    def _attach(self, make) -> None:
        try:
            self.attached.emit(make())
        except ImageRefused as exc:
            self.refused.emit(str(exc))

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
