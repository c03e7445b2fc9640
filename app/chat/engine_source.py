"""Which engine the chat replies with: this computer's loaded model, or a model on a remote
OpenAI-compatible server (app/chat/remote_engine.py). A button under the message box shows the
one in use and switches; "Remote server…" opens the dialog that finds the server's models."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QDialog, QMenu, QToolButton, QWidget

from app.chat.remote_dialog import RemoteServerDialog
from app.chat.remote_engine import RemoteEngine
from app.common import banner as b
from app.common.accessibility import named
from engine.remote import keys
from engine.remote.endpoints import RemoteChoice, load_choice, save_choice

LOCAL_LABEL = "This computer"
BUTTON_CHARS = 28  # a long model name is cut on the button (the tooltip has it whole)


class EngineSource:
    """The engine button and the remote engine behind it, for one chat page."""

    def __init__(self, view: QWidget, notice: b.Banner, choice_path: Path | None = None):
        self._view = view
        self._notice = notice
        self._choice_path = choice_path
        self.remote = RemoteEngine(view)
        self.button = named(QToolButton(view), "Engine", "Which engine writes the replies")
        self.button.setObjectName("engineSourceButton")
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.button)
        self.menu.aboutToShow.connect(self._fill_menu)
        self.button.setMenu(self.menu)
        self.remote.choice = load_choice(choice_path)  # offered, not used until chosen
        self.remote.changed.connect(self._show)
        self._show()

    def _show(self) -> None:
        label = self.remote.label if self.remote.active else LOCAL_LABEL
        shown = label if len(label) <= BUTTON_CHARS else label[: BUTTON_CHARS - 1] + "…"
        self.button.setText(f"Engine: {shown}")
        self.button.setToolTip(
            f"Replies come from {label} (an OpenAI-compatible server)"
            if self.remote.active
            else "Replies come from the model loaded on this computer"
        )

    def _fill_menu(self) -> None:
        self.menu.clear()
        group = QActionGroup(self.menu)
        local = QAction(LOCAL_LABEL, self.menu, checkable=True)
        local.setChecked(not self.remote.active)
        local.triggered.connect(self.use_local)
        group.addAction(local)
        self.menu.addAction(local)
        if self.remote.choice is not None:
            remote = QAction(self.remote.label, self.menu, checkable=True)
            remote.setChecked(self.remote.active)
            remote.triggered.connect(lambda: self.use_remote(self.remote.choice))
            group.addAction(remote)
            self.menu.addAction(remote)
        self.menu.addSeparator()
        self.menu.addAction("Remote server…", self.choose_server)

    def use_local(self) -> None:
        if not self.remote.generating:
            self.remote.use_local()

    def use_remote(self, choice: RemoteChoice, api_key: str | None = None) -> None:
        if self.remote.generating:
            return
        key = keys.read_key(choice.base_url) if api_key is None else api_key
        self.remote.use(choice, key)
        save_choice(choice, self._choice_path)

    def choose_server(self) -> None:
        dialog = RemoteServerDialog(self._view, self.remote.choice)
        if dialog.exec() != QDialog.DialogCode.Accepted or dialog.choice() is None:
            return
        self.use_remote(dialog.choice(), dialog.api_key())
        if dialog.key_note:
            self._notice.show_message(b.INFO, "The API key was not saved", dialog.key_note)
