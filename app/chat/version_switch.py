"""The `‹ 2/3 ›` control beside a message's author label: which of its versions is shown
(regenerated replies, edited messages), and one click to the previous or the next.

Painted by the message delegate on the label line (so rows keep their height), and hit-tested
by the same geometry, so what is drawn is what is clicked.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter

PREVIOUS = "‹"
NEXT = "›"
GAP_PX = 10  # between the author label and the control
ARROW_PAD_PX = 6  # each side of an arrow: a target larger than the glyph


@dataclass(frozen=True)
class VersionSwitch:
    previous: QRect
    counter: QRect
    next: QRect
    which: int
    count: int

    @property
    def text(self) -> str:
        return f"{self.which}/{self.count}"

    def step_at(self, pos: QPoint) -> int:
        """-1 or +1 for a click on an arrow that can move, else 0."""
        if self.previous.contains(pos) and self.which > 1:
            return -1
        if self.next.contains(pos) and self.which < self.count:
            return +1
        return 0


def version_switch(
    label_rect: QRect,
    label_width: int,
    metrics: QFontMetrics,
    branches: tuple[int, int],
    *,
    on_right: bool,
) -> VersionSwitch | None:
    """Where the control goes on a label line; None when the message has one version.

    `on_right`: the label is right-aligned (the person's messages), so the control goes to its
    left; otherwise it follows the label.
    """
    which, count = branches
    if count <= 1:
        return None
    arrow_w = max(metrics.horizontalAdvance(PREVIOUS), metrics.horizontalAdvance(NEXT))
    arrow_w += 2 * ARROW_PAD_PX
    counter_w = metrics.horizontalAdvance(f"{count}/{count}") + 4
    total = 2 * arrow_w + counter_w
    if on_right:
        left = label_rect.right() - label_width - GAP_PX - total + 1
    else:
        left = label_rect.left() + label_width + GAP_PX
    top, height = label_rect.top(), label_rect.height()
    previous = QRect(left, top, arrow_w, height)
    counter = QRect(previous.right() + 1, top, counter_w, height)
    following = QRect(counter.right() + 1, top, arrow_w, height)
    return VersionSwitch(previous, counter, following, which, count)


def paint_version_switch(
    painter: QPainter, switch: VersionSwitch, text: QColor, muted: QColor, *, enabled: bool
) -> None:
    """Arrows that can move in the text colour, the others (and all while a reply streams)
    muted."""
    centred = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextDontClip
    can_go_back = enabled and switch.which > 1
    can_go_on = enabled and switch.which < switch.count
    painter.setPen(text if can_go_back else muted)
    painter.drawText(switch.previous, centred, PREVIOUS)
    painter.setPen(muted)
    painter.drawText(switch.counter, centred, switch.text)
    painter.setPen(text if can_go_on else muted)
    painter.drawText(switch.next, centred, NEXT)
