"""The chat settings' Tools section: the tools the configured MCP servers offer, each on or off
for this chat, the servers' problems, and the way to Settings › Tool servers."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.tool_catalog import ToolCatalog
from app.common.accessibility import named
from engine.tools.approval import offered_name
from engine.untrusted_text import printable_line


class ToolsPanel(QWidget):
    turned_off_changed = Signal()

    def __init__(self, catalog: ToolCatalog, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("toolsPanel")
        self.catalog = catalog
        self._off: set[str] = set()
        heading = QLabel("Tools")
        heading.setObjectName("panelHeading")
        self.status = QLabel("")
        self.status.setObjectName("toolsStatus")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # servers' messages: not HTML
        self.list = named(QListWidget(self), "Tools for this chat", "Checked tools are offered")
        self.list.setMaximumHeight(140)
        self.list.itemChanged.connect(self._item_changed)
        self.servers_button = named(QPushButton("Servers…"), "Tool servers")
        self.servers_button.setToolTip("Add or change the MCP servers whose tools chats may use")
        self.refresh_button = named(QPushButton("Refresh"), "List the tools again")
        self.refresh_button.clicked.connect(catalog.refresh)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.servers_button)
        buttons.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.addWidget(heading)
        layout.addWidget(self.status)
        layout.addWidget(self.list)
        layout.addLayout(buttons)
        catalog.changed.connect(self.show_tools)
        self.show_tools()

    @property
    def turned_off(self) -> set[str]:
        return set(self._off)

    def set_turned_off(self, names) -> None:
        self._off = set(names)
        self.show_tools()

    def show_tools(self) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for tool in self.catalog.tools:
            name = offered_name(tool)
            item = QListWidgetItem(printable_line(f"{tool.name} ({tool.server})"))
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setToolTip(tool.description or name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(
                Qt.CheckState.Unchecked if name in self._off else Qt.CheckState.Checked
            )
            self.list.addItem(item)
        self.list.blockSignals(False)
        self.list.setVisible(bool(self.catalog.tools))
        self.status.setText(self._status_text())

    def _status_text(self) -> str:
        if self.catalog.listing:
            return "Listing the servers' tools…"
        problems = [
            f"{name}: {why}" if name else why for name, why in self.catalog.problems.items()
        ]
        if not self.catalog.servers():
            text = "No tool servers yet. Add an MCP server to let the model call its tools."
        elif not self.catalog.tools:
            text = "The servers offer no tools."
        else:
            on = sum(1 for t in self.catalog.tools if offered_name(t) not in self._off)
            text = f"{on} of {len(self.catalog.tools)} tools on; each call asks you first."
        return "\n".join([text, *problems])

    def _item_changed(self, item: QListWidgetItem) -> None:
        name = item.data(Qt.ItemDataRole.UserRole)
        if item.checkState() == Qt.CheckState.Checked:
            self._off.discard(name)
        else:
            self._off.add(name)
        self.status.setText(self._status_text())
        self.turned_off_changed.emit()
