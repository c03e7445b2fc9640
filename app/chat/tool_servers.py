"""Settings › Tool servers: the MCP servers Hearth may start or reach, added, changed and
removed. A server is a command Hearth starts (stdio) or an address (streamable HTTP) with
headers; engine/tools/servers.py checks each and keeps them in mcp-servers.json."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from engine.tools.servers import (
    HTTP,
    STDIO,
    ServerConfigError,
    ServerList,
    form_text,
    server_from_form,
)

NEW_SERVER = "New server"


class ToolServersDialog(QDialog):
    saved = Signal()  # a server was added, changed or removed

    def __init__(self, server_list: ServerList, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Tool servers (MCP)")
        self.setObjectName("toolServersDialog")
        self.server_list = server_list
        self.list = named(QListWidget(self), "Tool servers")
        self.list.currentTextChanged.connect(self._show_server)
        self.add_button = named(QPushButton("Add", self), "Add a tool server")
        self.add_button.clicked.connect(self._new_server)
        self.remove_button = named(QPushButton("Remove", self), "Remove this tool server")
        self.remove_button.clicked.connect(self._remove)

        self.name = named(QLineEdit(self), "Server name")
        self.transport = named(QComboBox(self), "How to reach the server")
        self.transport.addItem("Start a command (stdio)", STDIO)
        self.transport.addItem("Connect to an address (streamable HTTP)", HTTP)
        self.transport.currentIndexChanged.connect(self._show_transport)
        self.command = named(QLineEdit(self), "Command line", "The program and its arguments")
        self.command.setPlaceholderText("npx -y @modelcontextprotocol/server-filesystem ~/notes")
        self.url = named(QLineEdit(self), "Server address")
        self.url.setPlaceholderText("https://example.com/mcp")
        self.headers = named(QPlainTextEdit(self), "Headers", "One per line, as Name: value")
        self.headers.setPlaceholderText("Authorization: Bearer …")
        self.headers.setFixedHeight(64)
        self.enabled = named(QCheckBox("Offer its tools to chats", self), "Server enabled")
        self.enabled.setChecked(True)
        self.save_button = named(QPushButton("Save server", self), "Save this tool server")
        self.save_button.clicked.connect(self.save)
        self.status = QLabel("", self)
        self.status.setObjectName("toolServerStatus")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)

        self.form = QFormLayout()
        self.form.addRow("Name", self.name)
        self.form.addRow("Kind", self.transport)
        self.form.addRow("Command", self.command)
        self.form.addRow("Address", self.url)
        self.form.addRow("Headers", self.headers)
        self.form.addRow("", self.enabled)
        list_buttons = QHBoxLayout()
        list_buttons.addWidget(self.add_button)
        list_buttons.addWidget(self.remove_button)
        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        left.addLayout(list_buttons)
        right = QVBoxLayout()
        right.addLayout(self.form)
        right.addWidget(self.save_button)
        right.addWidget(self.status)
        right.addStretch(1)
        columns = QHBoxLayout()
        columns.addLayout(left, 2)
        columns.addLayout(right, 3)
        layout = QVBoxLayout(self)
        layout.addLayout(columns)
        layout.addWidget(close)
        self._refill()
        if not self.list.count():
            self._new_server()
        self._show_transport()

    def _refill(self, current: str = "") -> None:
        self.list.blockSignals(True)
        self.list.clear()
        names = [s.name for s in self.server_list.servers()]
        self.list.addItems(names)
        self.list.blockSignals(False)
        if current in names:
            self.list.setCurrentRow(names.index(current))
        elif names:
            self.list.setCurrentRow(0)
        self.remove_button.setEnabled(bool(names))

    def _show_server(self, name: str) -> None:
        server = self.server_list.server(name)
        if server is None:
            return
        command, headers = form_text(server)
        self.name.setText(server.name)
        self.transport.setCurrentIndex(self.transport.findData(server.transport))
        self.command.setText(command)
        self.url.setText(server.url)
        self.headers.setPlainText(headers)
        self.enabled.setChecked(server.enabled)
        self.status.setText("")

    def _new_server(self) -> None:
        self.list.setCurrentRow(-1)  # the form is a new server's, not the last one shown
        self.name.setText(NEW_SERVER if self.server_list.server(NEW_SERVER) is None else "")
        self.command.clear()
        self.url.clear()
        self.headers.clear()
        self.enabled.setChecked(True)
        self.status.setText("Fill in the server, then Save server.")
        self.name.setFocus()

    def _show_transport(self) -> None:
        stdio = self.transport.currentData() == STDIO
        for widget, shown in (
            (self.command, stdio),
            (self.url, not stdio),
            (self.headers, not stdio),
        ):
            widget.setVisible(shown)
            self.form.labelForField(widget).setVisible(shown)

    def save(self) -> bool:
        """Save the form as a server (replacing the one shown if renamed); False, and why in
        the status line, when it cannot be used as it is."""
        old = (
            self.server_list.server(self.list.currentItem().text())
            if self.list.currentItem()
            else None
        )
        try:
            server = server_from_form(
                self.name.text(),
                self.transport.currentData(),
                self.command.text(),
                self.url.text(),
                self.headers.toPlainText(),
                enabled=self.enabled.isChecked(),
                env=dict(old.env) if old is not None else None,
            )
        except ServerConfigError as exc:
            self.status.setText(str(exc))
            return False
        if old is not None and old.name != server.name:
            self.server_list.remove(old.name)
        self.server_list.save(server)
        self._refill(server.name)
        self.status.setText(f"Saved {server.name}. Its tools are listed in each chat's settings.")
        self.saved.emit()
        return True

    def _remove(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        self.server_list.remove(item.text())
        self._refill()
        if not self.list.count():
            self._new_server()
        self.saved.emit()
