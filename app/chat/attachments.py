"""Images in the chat box: made from a dropped file or a pasted picture, shown as thumbnails
above the box until sent, then kept with the message (engine/chat/store.py) and painted as
thumbnails in it (message_delegate.py).

A file's header is checked (engine/chat/images.py: format, size, pixels) before Qt decodes
it, so a decompression bomb dropped in, or carried in an imported chat, is refused with the
reason instead of filling the memory. Every image is scaled to at most IMAGE_SIDE pixels a side
and kept as PNG (with transparency) or JPEG: vision projectors resize images to a few hundred
pixels anyway, and a 12-megapixel photo would otherwise weigh several megabytes in every turn
sent to the engine.
"""

from __future__ import annotations

import base64
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QImageReader, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QToolButton, QWidget

from engine.chat.images import ImageRefused, check_image
from engine.chat.store import Attachment

IMAGE_SIDE = 1536  # pixels, the longer side of an image kept with a message
THUMB_SIDE = 72  # pixels, a thumbnail's longer side
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp")
MAX_PENDING = 8  # images waiting in the box (engine/chat/images.py's MAX_IMAGES)


def is_image_file(path: str | Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def attachment_from_file(path: str | Path) -> Attachment:
    """A dropped image file as an attachment; ImageRefused saying why it is not taken."""
    path = Path(path)
    try:
        data = path.read_bytes() if path.stat().st_size <= 64 * 2**20 else b""
    except OSError as exc:
        raise ImageRefused(f"{path.name} could not be read ({exc.strerror or exc}).") from None
    if not data:
        raise ImageRefused(f"{path.name} is too large to be an image to send.")
    facts = _checked(data, path.name)
    image = _decoded(data, path.name)
    if facts.width <= IMAGE_SIDE and facts.height <= IMAGE_SIDE and facts.mime_type in (
        "image/png", "image/jpeg"
    ):  # fmt: skip
        return Attachment("image", facts.mime_type, path.name, data)  # kept as it came
    return attachment_from_image(image, path.name)


def attachment_from_image(image: QImage, name: str = "pasted image") -> Attachment:
    """A picture (pasted, or a file in another format) as a PNG or JPEG attachment."""
    if image.isNull():
        raise ImageRefused("The pasted picture is empty.")
    if max(image.width(), image.height()) > IMAGE_SIDE:
        image = image.scaled(IMAGE_SIDE, IMAGE_SIDE, Qt.AspectRatioMode.KeepAspectRatio,
                             Qt.TransformationMode.SmoothTransformation)  # fmt: skip
    alpha = image.hasAlphaChannel()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG" if alpha else "JPEG", -1 if alpha else 90)
    buffer.close()
    stem = Path(name).stem or "image"
    suffix, mime = (".png", "image/png") if alpha else (".jpg", "image/jpeg")
    return Attachment("image", mime, stem + suffix, bytes(data.data()))


def thumbnail(attachment: Attachment, side: int = THUMB_SIDE) -> QPixmap:
    """A thumbnail of at most `side` pixels, decoded at that size; an empty pixmap for an
    image that is refused (a hostile one in an imported chat) or cannot be decoded."""
    try:
        facts = check_image(attachment.data)
    except ImageRefused:
        return QPixmap()
    data = QByteArray(attachment.data)
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.ReadOnly)
    reader = QImageReader(buffer)
    scale = min(1.0, side / max(1, facts.width, facts.height))
    reader.setScaledSize(QSize(max(1, round(facts.width * scale)),
                               max(1, round(facts.height * scale))))  # fmt: skip
    image = reader.read()
    return QPixmap.fromImage(image) if not image.isNull() else QPixmap()


def base64_of(attachment: Attachment) -> str:
    return base64.b64encode(attachment.data).decode("ascii")


def _checked(data: bytes, name: str):
    try:
        return check_image(data)
    except ImageRefused as exc:
        raise ImageRefused(f"{name}: {exc}") from None


def _decoded(data: bytes, name: str) -> QImage:
    image = QImage.fromData(data)
    if image.isNull():
        raise ImageRefused(f"{name} could not be decoded as an image; send a PNG or JPEG.")
    return image


class AttachmentStrip(QWidget):
    """The images waiting to go with the next message, as thumbnails; a click removes one."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("attachmentStrip")
        self._items: list[Attachment] = []
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._layout.addStretch(1)
        self.hide()

    def attachments(self) -> tuple[Attachment, ...]:
        return tuple(self._items)

    def add(self, attachment: Attachment) -> bool:
        """Add an image; False when the box holds MAX_PENDING already."""
        if len(self._items) >= MAX_PENDING:
            return False
        self._items.append(attachment)
        button = QToolButton(self)
        button.setObjectName("attachmentThumb")
        button.setIcon(QIcon(thumbnail(attachment)))
        button.setIconSize(QSize(THUMB_SIDE, THUMB_SIDE))
        button.setToolTip(f"{attachment.name}: click to remove it")
        button.setAccessibleName(f"Image {attachment.name}")
        button.clicked.connect(lambda: self._remove(button))
        self._layout.insertWidget(self._layout.count() - 1, button)
        self.show()
        self.changed.emit()
        return True

    def buttons(self) -> list[QToolButton]:
        return [w for w in self.findChildren(QToolButton, "attachmentThumb") if w.parent() is self]

    def clear(self) -> None:
        for button in self.buttons():
            button.deleteLater()
            self._layout.removeWidget(button)
        self._items.clear()
        self.hide()
        self.changed.emit()

    def _remove(self, button: QToolButton) -> None:
        index = self._layout.indexOf(button)
        if 0 <= index < len(self._items):
            del self._items[index]
        self._layout.removeWidget(button)
        button.deleteLater()
        self.setVisible(bool(self._items))
        self.changed.emit()
