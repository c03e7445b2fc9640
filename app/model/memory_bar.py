"""One device's predicted memory as a stacked bar: weights, KV cache, compute, overhead, free.

The bar's full width is the device's budget (or what is planned, when that is more). Over budget,
the part past the budget is drawn red and the frame turns red. Colours are fixed hues that read on
light and dark palettes; text uses the palette.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from engine.planner import DeviceUsage
from engine.units import format_bytes

GIB = 1024**3
SEGMENTS = (  # (name, colour); the order they are stacked in
    ("Weights", QColor(59, 130, 246)),
    ("KV cache", QColor(168, 85, 247)),
    ("Compute", QColor(245, 158, 11)),
    ("Overhead", QColor(100, 116, 139)),
    ("Vision projector", QColor(20, 184, 166)),
)
OVER_COLOR = QColor(220, 38, 38)
OVER_BUDGET = "Over budget"  # the legend's name for the part of a bar past the budget
BAR_HEIGHT = 22


def gib(n: int) -> str:
    return format_bytes(n, 1, "GiB")


class MemoryBar(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("memoryBar")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.usage: DeviceUsage | None = None

    def set_usage(self, usage: DeviceUsage) -> None:
        self.usage = usage
        self.setToolTip(
            "\n".join(
                f"{name}: {gib(value)}"
                for (name, _), value in zip(SEGMENTS, self.parts(), strict=True)
            )
            + (f"\nFree: {gib(usage.free_bytes)}" if usage.free_bytes is not None else "")
        )
        self.update()

    def parts(self) -> tuple[int, int, int, int, int]:
        u = self.usage
        if u is None:
            return (0, 0, 0, 0, 0)
        return (u.weights_bytes, u.kv_bytes, u.compute_bytes, u.overhead_bytes, u.projector_bytes)

    @property
    def over_budget(self) -> bool:
        u = self.usage
        return u is not None and u.free_bytes is not None and u.free_bytes < 0

    def sizeHint(self) -> QSize:
        return QSize(320, BAR_HEIGHT)

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        palette = self.palette()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(palette.color(QPalette.ColorRole.AlternateBase))
        painter.drawRoundedRect(rect, 5, 5)
        u = self.usage
        if u is not None:
            total = u.total_bytes
            scale_to = max(total, u.budget_bytes or 0, 1)
            x = rect.left()
            painter.save()
            painter.setClipRect(rect)
            for (_, colour), value in zip(SEGMENTS, self.parts(), strict=True):
                width = rect.width() * value / scale_to
                painter.setBrush(colour)
                painter.drawRect(QRectF(x, rect.top(), width, rect.height()))
                x += width
            if self.over_budget and u.budget_bytes is not None:
                start = rect.left() + rect.width() * u.budget_bytes / scale_to
                # Opaque red, hatched: a tint over the segments read as the KV cache's purple.
                over = QRectF(start, rect.top(), rect.right() - start, rect.height())
                painter.setBrush(OVER_COLOR)
                painter.drawRect(over)
                painter.setBrush(QBrush(QColor(255, 255, 255, 110), Qt.BrushStyle.BDiagPattern))
                painter.drawRect(over)
            painter.restore()
        border = OVER_COLOR if self.over_budget else palette.color(QPalette.ColorRole.Mid)
        painter.setPen(QPen(border, 2 if self.over_budget else 1))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect, 5, 5)
        painter.end()


class DeviceMemoryRow(QWidget):
    """The device's name, its bar, and "used / budget"."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.name = QLabel()
        self.name.setObjectName("deviceName")
        self.name.setFixedWidth(150)
        self.bar = MemoryBar()
        self.figures = QLabel()
        self.figures.setObjectName("deviceFigures")
        self.figures.setMinimumWidth(130)
        self.figures.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.addWidget(self.name)
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.figures)

    def set_usage(self, usage: DeviceUsage) -> None:
        self.name.setText(usage.name)
        self.name.setToolTip(usage.name)
        self.bar.set_usage(usage)
        budget = f" / {gib(usage.budget_bytes)}" if usage.budget_bytes is not None else ""
        self.figures.setText(f"{gib(usage.total_bytes)}{budget}")
        colour = OVER_COLOR.name() if self.bar.over_budget else ""
        self.figures.setStyleSheet(f"color: {colour}; font-weight: bold;" if colour else "")


class Legend(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(150, 0, 0, 0)
        layout.setSpacing(14)
        for name, colour in (*SEGMENTS, ("Free", None), (OVER_BUDGET, OVER_COLOR)):
            swatch = QLabel()
            swatch.setFixedSize(12, 12)
            fill = colour.name() if colour else "palette(alternate-base)"
            swatch.setStyleSheet(
                f"background: {fill}; border: 1px solid palette(mid); border-radius: 3px;"
            )
            layout.addWidget(swatch)
            layout.addWidget(QLabel(name))
        layout.addStretch(1)
