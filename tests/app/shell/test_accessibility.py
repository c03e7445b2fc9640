"""The real main window, walked widget by widget on every page: each control has a name a screen
reader can say, Tab follows the layout, and text reads at WCAG AA contrast."""

from __future__ import annotations

import re

from PySide6.QtGui import QAccessible, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

from app.common.accessibility import layout_order
from app.common.theme import AA_TEXT, apply_theme, contrast
from tests.app.conftest import make_window, open_in_window

CONTROLS = (QAbstractButton, QLineEdit, QAbstractSpinBox, QComboBox, QAbstractSlider,
            QAbstractItemView, QPlainTextEdit, QTextEdit)  # fmt: skip


def _is_part_of_another(widget: QWidget) -> bool:
    """A spin box's or combo box's own editor, a view's header: named by their owner."""
    return isinstance(widget, QHeaderView) or isinstance(
        widget.parent(), QAbstractSpinBox | QComboBox
    )


def _controls(window) -> list[QWidget]:
    return [
        w
        for w in window.findChildren(QWidget)
        if isinstance(w, CONTROLS) and w.isVisibleTo(window) and not _is_part_of_another(w)
    ]


def _unnamed(widget: QWidget) -> str | None:
    """Why `widget` has no usable name, or None when it has one."""
    iface = QAccessible.queryAccessibleInterface(widget)
    name = iface.text(QAccessible.Text.Name) if iface is not None else ""
    if isinstance(widget, QComboBox):
        # Qt on Linux says a combo box's value as its name (the label goes by relation); the
        # accessible name is what other platforms read
        name = widget.accessibleName()
    if not re.search(r"[^\W\d_]", name or ""):
        return f"no name ({name!r})"
    return None


def _tab_chain(window) -> list[QWidget]:
    chain, widget = [], window.nextInFocusChain()
    while widget is not window and len(chain) < 5000:
        chain.append(widget)
        widget = widget.nextInFocusChain()
    return chain


def _background(widget: QWidget):
    """The colour behind `widget`: the nearest ancestor that paints its own background."""
    owner = widget
    while owner.parentWidget() is not None and not owner.autoFillBackground():
        owner = owner.parentWidget()
    return owner.palette().color(owner.backgroundRole())


def _least_contrast(label: QLabel) -> float:
    font = label.font()
    large = font.pointSizeF() >= 18 or (font.bold() and font.pointSizeF() >= 14)
    return 3.0 if large else AA_TEXT


def test_every_control_is_named_tab_follows_the_layout_and_text_reads(
    qtbot, bridge, tmp_path, starter_model
):
    apply_theme(QApplication.instance())
    window = make_window(qtbot, bridge, tmp_path)
    window.resize(1100, 760)
    window.show()
    bridge.start()
    open_in_window(qtbot, window, starter_model)
    window.chat_view.header.settings_button.setChecked(True)  # its controls too
    problems = []
    for name in window.page_names():
        window.show_page(name)
        qtbot.wait(10)
        page = window.page(name)
        for control in _controls(window):
            why = _unnamed(control)
            if why:
                problems.append(f"{name}: {type(control).__name__} {control.objectName()!r}: {why}")
        order = [w for w in layout_order(page) if w.isVisibleTo(window) and w.isEnabled()]
        stops = set(order)
        chain = [w for w in _tab_chain(window) if w in stops]
        seen = list(dict.fromkeys(chain))
        if seen != order:
            problems.append(
                f"{name}: Tab goes {[w.objectName() or type(w).__name__ for w in seen]}, "
                f"the layout {[w.objectName() or type(w).__name__ for w in order]}"
            )
        for label in window.findChildren(QLabel):
            if not label.isVisibleTo(window) or not label.text().strip():
                continue
            fg = label.palette().color(QPalette.ColorGroup.Active, label.foregroundRole())
            ratio = contrast(fg, _background(label))
            if ratio < _least_contrast(label):
                problems.append(
                    f"{name}: label {label.objectName() or label.text()[:30]!r}: {ratio:.2f}:1"
                )
    assert not problems, "\n".join(dict.fromkeys(problems))
