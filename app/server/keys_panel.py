"""The Server page's named API keys: create one (shown once, then only its hash is kept), revoke
one, and see how many requests each has made to the window's server.

The same store as `hearth keys` (engine/server/api_keys.py), so keys made here work with
`hearth serve` too, and a key revoked here is refused by a background server from its next
request on.
"""

from __future__ import annotations

import time

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from engine.server.api_keys import KeyStore, KeyStoreError

COLUMNS = ("Name", "Starts with", "Created", "Requests")


class KeysPanel(QWidget):
    def __init__(self, store: KeyStore | None = None, parent=None) -> None:
        super().__init__(parent)
        self.store = store or KeyStore()
        self._counts: dict[str, int] = {}

        self.table = named(QTableWidget(0, len(COLUMNS)), "API keys")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setMaximumHeight(140)
        self.name_edit = named(QLineEdit(), "New key's name")
        self.name_edit.setPlaceholderText("what the key is for, e.g. laptop")
        self.create_button = QPushButton("Create key")
        self.create_button.clicked.connect(self.create)
        self.revoke_button = QPushButton("Revoke")
        self.revoke_button.clicked.connect(self.revoke_selected)
        self.new_key = named(QLineEdit(), "New key")
        self.new_key.setReadOnly(True)
        self.new_key.setVisible(False)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setVisible(False)
        self.copy_button.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(self.new_key.text())
        )
        self.message = QLabel(
            "Named keys work beside the key above: while any exists, every request needs one."
        )
        self.message.setWordWrap(True)
        self.message.setObjectName("placeholderText")

        row = QHBoxLayout()
        row.addWidget(self.name_edit, 1)
        row.addWidget(self.create_button)
        row.addWidget(self.revoke_button)
        shown = QHBoxLayout()
        shown.addWidget(self.new_key, 1)
        shown.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)
        layout.addLayout(row)
        layout.addLayout(shown)
        layout.addWidget(self.message)
        self.refresh()

    def create(self) -> None:
        name = self.name_edit.text().strip()
        try:
            key = self.store.create(name)
        except (KeyStoreError, OSError) as exc:
            self.message.setText(str(exc))
            return
        self.name_edit.clear()
        self.new_key.setText(key)
        self.new_key.setVisible(True)
        self.copy_button.setVisible(True)
        self.message.setText(f"Key {name!r} created. Copy it now: it is not shown again (only "
                             "its hash is kept). Clients send it as 'Authorization: Bearer "
                             "KEY'.")  # fmt: skip
        self.refresh()

    def revoke_selected(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        if not rows:
            self.message.setText("Select the key to revoke in the list first.")
            return
        name = self.table.item(rows[0], 0).text()
        try:
            self.store.revoke(name)
        except (KeyStoreError, OSError) as exc:
            self.message.setText(str(exc))
            return
        self.new_key.setVisible(False)
        self.copy_button.setVisible(False)
        self.message.setText(f"Key {name!r} revoked: servers refuse it from the next request on.")
        self.refresh()

    def show_counts(self, counts: dict[str, int]) -> None:
        """Requests per key name (the window's server's request log)."""
        self._counts = dict(counts)
        self.refresh()

    def refresh(self) -> None:
        keys = self.store.listed()
        self.table.setRowCount(len(keys))
        for row, key in enumerate(keys):
            made = time.strftime("%Y-%m-%d %H:%M", time.localtime(key.created_at))
            cells = (key.name, key.shown, made, str(self._counts.get(key.name, 0)))
            for column, text in enumerate(cells):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.revoke_button.setEnabled(bool(keys))
