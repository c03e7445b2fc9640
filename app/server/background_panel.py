"""The Server page's view of a Hearth server already running outside the window (`hearth serve
--detach`, the systemd unit, a terminal): where it listens, what it serves, since when, its
log; and a button that stops it. Found by the record every `hearth serve` leaves
(engine/server/service.py); stopping waits off the GUI thread.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine.server.service import (
    ServerRecord,
    health_summary,
    running_server,
    server_health,
    stop_server,
)
from engine.untrusted_text import printable_line

NONE_TEXT = (
    "No Hearth server runs in the background. `hearth serve --detach` starts one, "
    "`hearth service install` starts one at every login."
)


class BackgroundPanel(QWidget):
    stopped = Signal(bool)  # from the stopping thread: whether it ended
    health_read = Signal(object, str)  # (the record asked about, /health's line) from a thread

    def __init__(self, record_path: Path | None = None, parent=None) -> None:
        super().__init__(parent)
        self._record_path = record_path
        self.record: ServerRecord | None = None
        self._described = ""
        self.label = QLabel(NONE_TEXT)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refresh_button = QPushButton("Look again")
        self.refresh_button.clicked.connect(self.refresh)
        self.stop_button = QPushButton("Stop it")
        self.stop_button.clicked.connect(self.stop)
        buttons = QHBoxLayout()
        buttons.addWidget(self.refresh_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addLayout(buttons)
        self.stopped.connect(self._on_stopped, Qt.ConnectionType.QueuedConnection)
        self.health_read.connect(self._on_health, Qt.ConnectionType.QueuedConnection)
        self.refresh()

    def refresh(self) -> None:
        self.record = running_server(self._record_path)
        record = self.record
        self.stop_button.setEnabled(record is not None)
        if record is None:
            self.label.setText(NONE_TEXT)
            return
        since = time.strftime("%H:%M on %Y-%m-%d", time.localtime(record.started_at))
        log = f" Log: {record.log_path}." if record.log_path else ""
        self._described = (
            f"A Hearth server is running outside the window: {record.base_url} (process "
            f"{record.pid}, since {since}), serving {printable_line(record.serving)}.{log} "
            "Its clients are answered from there; stop it to serve from the window on its port."
        )
        self.label.setText(self._described)
        threading.Thread(target=self._read_health, args=(record,), name="server-health",
                         daemon=True).start()  # fmt: skip

    def _read_health(self, record: ServerRecord) -> None:  # a thread: the request may wait
        self.health_read.emit(record, health_summary(server_health(record.base_url, 2.0)))

    def _on_health(self, record: ServerRecord, summary: str) -> None:
        if summary and record == self.record:
            self.label.setText(f"{self._described} {printable_line(summary)}")

    def stop(self) -> None:
        record = self.record
        if record is None:
            return
        self.stop_button.setEnabled(False)
        self.label.setText(f"Stopping the server at {record.base_url}…")
        threading.Thread(
            target=lambda: self.stopped.emit(stop_server(record)), name="stop-server", daemon=True
        ).start()

    def _on_stopped(self, ended: bool) -> None:
        pid = self.record.pid if self.record is not None else 0
        self.refresh()
        if not ended:
            self.label.setText(f"The server (process {pid}) did not stop; end it with "
                               f"`kill -9 {pid}`.")  # fmt: skip
        elif self.record is None:
            self.label.setText(f"Stopped. {NONE_TEXT}")
