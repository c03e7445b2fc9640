"""Keyboard and screen-reader access: Tab follows the screen, and every control has a name.

Qt's Tab order is the order widgets were created in, which drifts from what the screen shows as
pages grow (a row added at the top, a header built after the list below it). `layout_order` reads
the order off the layouts themselves (top to bottom, left to right, form rows in turn), and
`order_tabs_by_layout` makes Tab follow it; the window applies it to each page as it is shown,
and a banner when its buttons change.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QLayout,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QWidget,
)


def named(widget: QWidget, name: str, description: str = "") -> QWidget:
    """Give `widget` the name (and description) a screen reader says; returns it."""
    widget.setAccessibleName(name)
    if description:
        widget.setAccessibleDescription(description)
    return widget


def takes_tab(widget: QWidget) -> bool:
    return bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)


def layout_order(root: QWidget) -> list[QWidget]:
    """The widgets Tab may reach under `root`, in the order its layouts place them."""
    return [w for w in _walk_widget(root, top=True) if takes_tab(w)]


def _walk_widget(widget: QWidget, *, top: bool = False) -> Iterator[QWidget]:
    if not top:
        yield widget
    if isinstance(widget, QScrollArea) and widget.widget() is not None:
        yield from _walk_widget(widget.widget())
        return
    if isinstance(widget, QAbstractScrollArea | QTabWidget):
        return  # a control of its own (a list, an editor); its insides are not stops
    if isinstance(widget, QStackedWidget):
        if widget.currentWidget() is not None:
            yield from _walk_widget(widget.currentWidget())
        return
    if isinstance(widget, QSplitter):
        for i in range(widget.count()):
            yield from _walk_widget(widget.widget(i))
        return
    layout = widget.layout()
    if layout is not None:
        yield from _walk_layout(layout)


def _walk_layout(layout: QLayout) -> Iterator[QWidget]:
    for item in _items_in_reading_order(layout):
        if item.widget() is not None:
            yield from _walk_widget(item.widget())
        elif item.layout() is not None:
            yield from _walk_layout(item.layout())


def _items_in_reading_order(layout: QLayout) -> list:
    """A grid or form by (row, column), a box layout as it lays out (a right-to-left box too)."""
    items = [layout.itemAt(i) for i in range(layout.count())]
    positions = []
    if hasattr(
        layout, "getItemPosition"
    ):  # QGridLayout (row, column, ...); QFormLayout (row, role)
        for i, item in enumerate(items):
            where = layout.getItemPosition(i)
            row, col = where[0], where[1]
            positions.append(((row, int(col) if not hasattr(col, "value") else col.value), item))
        return [item for _, item in sorted(positions, key=lambda p: p[0])]
    direction = getattr(layout, "direction", None)
    if direction is not None and direction() in (
        layout.Direction.RightToLeft,
        layout.Direction.BottomToTop,
    ):
        return list(reversed(items))
    return items


def order_tabs_by_layout(root: QWidget) -> None:
    """Make Tab visit the controls under `root` in `layout_order`."""
    for first, second in itertools.pairwise(layout_order(root)):
        QWidget.setTabOrder(first, second)


def order_window_tabs(widget: QWidget) -> None:
    """`order_tabs_by_layout` over the whole window `widget` is in: a control made late (a
    banner's button) takes its place among the others, not the end of the window's Tab ring.
    (Qt moves a widget in the ring only after a focusable one, so the window is ordered whole.)"""
    top = widget.window()
    root = top.centralWidget() if isinstance(top, QMainWindow) else top
    if root is not None:
        order_tabs_by_layout(root)
