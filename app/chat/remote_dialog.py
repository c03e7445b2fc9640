"""Choosing a remote server as the chat's engine: its address, its API key, and one of the
models it offers (asked of its /v1/models off the GUI thread). The key goes to the OS keyring;
where there is none the dialog says so and the key is used for this session only."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from app.common.background import TaskRunner
from engine.remote import keys
from engine.remote.endpoints import RemoteChoice
from engine.remote.openai_client import Endpoint, RemoteError, list_models, normalized_base_url
from engine.untrusted_text import printable_line


class RemoteServerDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, choice: RemoteChoice | None = None):
        super().__init__(parent)
        self.setWindowTitle("Remote server")
        self.setObjectName("remoteServerDialog")
        self.url = named(QLineEdit(self), "Server address")
        self.url.setPlaceholderText("http://192.168.1.20:8080/v1")
        self.key = named(QLineEdit(self), "API key", "Leave empty for a server without a key")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("none")
        self.remember_key = named(
            QCheckBox("Keep the key in the system keyring", self), "Keep the key in the keyring"
        )
        self.remember_key.setChecked(True)
        self.get_models = named(QPushButton("Get models", self), "Get the server's models")
        self.get_models.clicked.connect(self.fetch_models)
        self.models = named(QComboBox(self), "Model on the server")
        self.models.setEnabled(False)
        self.status = QLabel("Type the address of an OpenAI-compatible server, then Get models.")
        self.status.setObjectName("remoteStatus")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # a server's error text: not HTML
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Use this model")
        self.ok_button.setEnabled(False)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        address_row = QHBoxLayout()
        address_row.addWidget(self.url, 1)
        address_row.addWidget(self.get_models)
        form = QFormLayout()
        form.addRow("Address", address_row)
        form.addRow("API key", self.key)
        form.addRow("", self.remember_key)
        form.addRow("Model", self.models)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)

        self._tasks = TaskRunner(self)
        self._base_url = ""
        self.key_note = ""  # why the key was not kept (no keyring), for the chat's notice
        if choice is not None:
            self.url.setText(choice.base_url)
            self.key.setText(keys.read_key(choice.base_url))

    def fetch_models(self) -> None:
        try:
            base_url = normalized_base_url(self.url.text())
        except RemoteError as exc:
            self.status.setText(str(exc))
            return
        self._base_url = base_url
        endpoint = Endpoint(base_url, self.key.text().strip())
        self.get_models.setEnabled(False)
        self.status.setText(f"Asking {endpoint.host} for its models…")
        self._tasks.run(lambda: list_models(endpoint), self._show_models)

    def _show_models(self, result) -> None:
        self.get_models.setEnabled(True)
        if isinstance(result, Exception):
            self.status.setText(str(result))
            return
        self.models.clear()
        for model in result:  # shown escaped, asked for as the server names it
            self.models.addItem(printable_line(model), model)
        self.models.setEnabled(True)
        self.ok_button.setEnabled(True)
        count = "1 model" if len(result) == 1 else f"{len(result)} models"
        self.status.setText(f"{self._base_url} offers {count}.")

    def choice(self) -> RemoteChoice | None:
        if not self._base_url or not self.models.currentData():
            return None
        return RemoteChoice(self._base_url, self.models.currentData())

    def api_key(self) -> str:
        return self.key.text().strip()

    def accept(self) -> None:
        """Keep the key (or forget it); a keyring that cannot keep it is said, not fatal."""
        if self.choice() is None:
            return
        self.key_note = ""
        try:
            if self.remember_key.isChecked():
                keys.save_key(self._base_url, self.api_key())
            else:
                keys.forget_key(self._base_url)
        except keys.KeyStoreError as exc:
            self.key_note = str(exc)
        super().accept()
