"""Keeping the transcript at its end while a reply streams, unless the person scrolled up.

Following is a state, not a guess made at each token: it is on until the person moves the scroll
bar away from the end, and on again when they come back to it (or press "Jump to latest"). The
end is re-taken whenever the scroll range grows, which is after the view has laid the grown row
out; checking "am I at the bottom?" before each token instead loses the end as soon as one token
adds more height than the slack (a code block, a long line that wraps), and never finds it again.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QPushButton

AT_END_SLACK_PX = 24  # within this distance of the end counts as being at the end
BUTTON_MARGIN_PX = 14


class TranscriptFollower(QObject):
    """Follows the end of `view`; shows a "Jump to latest" button over it when not following."""

    def __init__(self, view: QAbstractScrollArea):
        super().__init__(view)
        self._view = view
        self._bar = view.verticalScrollBar()
        self._moving = False  # our own scrolling is not the person leaving the end
        self.following = True
        self.button = QPushButton("↓  Jump to latest", view)
        self.button.setObjectName("jumpToLatest")
        self.button.setToolTip("Scroll to the newest message and follow the reply")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.clicked.connect(self.jump_to_latest)
        self.button.hide()
        self._bar.rangeChanged.connect(self._on_range_changed)
        self._bar.valueChanged.connect(self._on_value_changed)
        view.installEventFilter(self)

    def at_end(self) -> bool:
        return self._bar.value() >= self._bar.maximum() - AT_END_SLACK_PX

    def jump_to_latest(self) -> None:
        """Go to the end and follow from there (also what sending a message does)."""
        self.following = True
        self._to_end()
        self._update_button()

    def _to_end(self) -> None:
        self._moving = True
        try:
            self._bar.setValue(self._bar.maximum())
        finally:
            self._moving = False

    def _on_value_changed(self, _value: int) -> None:
        if not self._moving:
            self.following = self.at_end()
        self._update_button()

    def _on_range_changed(self, _minimum: int, _maximum: int) -> None:
        if self.following:
            self._to_end()
        self._update_button()

    def _update_button(self) -> None:
        show = not self.following and not self.at_end()
        if show:
            self._place_button()
        self.button.setVisible(show)

    def _place_button(self) -> None:
        self.button.adjustSize()
        viewport = self._view.viewport().geometry()
        x = viewport.center().x() - self.button.width() // 2
        y = viewport.bottom() - self.button.height() - BUTTON_MARGIN_PX
        self.button.move(x, y)
        self.button.raise_()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._view and event.type() == QEvent.Type.Resize:
            self._place_button()
        return False
