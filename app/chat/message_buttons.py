"""The actions of a message in sight: "Copy · Regenerate · Continue" on a reply's label line,
"Copy · Edit" on the person's, so nobody has to know about the right-click menu.

Painted by the message delegate at the far end of the label line (so rows keep their height) and
hit-tested by the same geometry, as the version switch is. Which actions a message has is
`actions_for`, a pure function of the message and whether a reply may start.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter

from app.chat.conversation_model import ROLE_ASSISTANT, ROLE_USER, ChatEntry

COPY = "Copy"
REGENERATE = "Regenerate"
EDIT = "Edit"
CONTINUE = "Continue"
GAP_PX = 12  # between two actions
PAD_PX = 3  # each side of an action's text: a target larger than the glyphs


def actions_for(entry: ChatEntry, *, idle: bool, can_reply: bool, last: bool) -> tuple[str, ...]:
    """What can be done to `entry` now: nothing while it streams; Edit only while no reply is
    being written (`idle`); Regenerate also needs a model ready (`can_reply`); Continue is for
    the last reply when it was cut short (stopped, or at the token limit)."""
    if entry.streaming:
        return ()
    actions = [COPY] if entry.text else []
    if entry.role == ROLE_USER and idle:
        actions.append(EDIT)
    elif entry.role == ROLE_ASSISTANT and idle and can_reply:
        actions.append(REGENERATE)
        if last and entry.text and not entry.failed and cut_short(entry):
            actions.append(CONTINUE)
    return tuple(actions)


def cut_short(entry: ChatEntry) -> bool:
    """A reply that ended before the model finished it: stopped, or at the token limit (its
    footer, the stats line, ends with why it ended)."""
    return entry.footer.endswith(("stopped", "token limit reached"))


@dataclass(frozen=True)
class MessageButtons:
    buttons: tuple[tuple[str, QRect], ...]

    def action_at(self, pos: QPoint) -> str | None:
        return next((name for name, rect in self.buttons if rect.contains(pos)), None)


def message_buttons(
    label_rect: QRect,
    metrics: QFontMetrics,
    actions: tuple[str, ...],
    *,
    on_right: bool,
    taken: tuple[int, int],
) -> MessageButtons:
    """Where `actions` go on a label line: at the end away from the label (`on_right`: the label
    is right-aligned, so they start at the left). `taken` is the (left, right) span the label
    and its version switch use; actions that would overlap it are left out (a narrow window)."""
    widths = [metrics.horizontalAdvance(a) + 2 * PAD_PX for a in actions]
    total = sum(widths) + GAP_PX * max(0, len(actions) - 1)
    x = label_rect.left() if on_right else label_rect.right() + 1 - total
    placed = []
    for name, width in zip(actions, widths, strict=True):
        rect = QRect(x, label_rect.top(), width, label_rect.height())
        if rect.right() < taken[0] or rect.left() > taken[1]:
            placed.append((name, rect))
        x += width + GAP_PX
    return MessageButtons(tuple(placed))


def paint_message_buttons(painter: QPainter, buttons: MessageButtons, colour: QColor) -> None:
    painter.setPen(colour)
    for name, rect in buttons.buttons:
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextDontClip, name)
