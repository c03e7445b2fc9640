"""The Server page: turn the local API on and off, see its address and keys, watch its requests;
create and revoke named API keys (keys_panel.py); see and stop a Hearth server already running
outside the window (background_panel.py).

The server runs on a thread of its own (engine/server/runner.py) over the window's own engine
worker: the bridge's EngineClient is shared, so a chat in the window and API requests decode
side by side (together in one batch when the model is loaded for parallel requests). The page
never blocks: the request log comes from the server thread through a queued signal.
"""

from __future__ import annotations

import collections
import secrets
import time
from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from app.common.engine_bridge import EngineBridge
from app.common.machine_state import MachineState
from app.server.background_panel import BackgroundPanel
from app.server.keys_panel import KeysPanel
from engine.runtime import protocol as p
from engine.server.capacity import MAX_PARALLEL, parallel_that_fit
from engine.server.config import DEFAULT_HOST, DEFAULT_PORT, ServerConfig, ServerConfigError
from engine.server.request_log import RequestLog, RequestRecord
from engine.server.runner import ServerThread, build_state

LOG_ROWS_KEPT = 500
COLUMNS = ("Time", "Client", "Route", "Status", "Prompt", "Tokens", "tok/s", "Seconds")
OFF_TEXT = "The API server is off. Start it to let other programs on this computer use the model."
BACK_TEXT = "It starts again, as it was, when the model has loaded again."


class ServerPage(QWidget):
    record_logged = Signal(object)  # RequestRecord, emitted on the server's thread

    def __init__(
        self, bridge: EngineBridge, machine: MachineState | None = None, parent=None
    ) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._machine = machine
        self._server: ServerThread | None = None
        self._config: ServerConfig | None = None
        # Set when the server was stopped by the engine (a crash, a reload), not by the person:
        # it comes back with the next model that loads, on the new worker.
        self.start_when_loaded = False

        title = QLabel("Server")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.5)
        font.setBold(True)
        title.setFont(font)
        self.status_label = QLabel(OFF_TEXT)
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.host_box = named(QComboBox(), "Address")
        self.host_box.setEditable(True)
        self.host_box.addItems([DEFAULT_HOST, "0.0.0.0"])
        self.host_box.setToolTip("127.0.0.1: this computer only. Any other address lets other "
                                 "machines in, and then needs an API key.")  # fmt: skip
        self.port_box = named(QSpinBox(), "Port")
        self.port_box.setRange(1024, 65535)
        self.port_box.setValue(DEFAULT_PORT)
        self.key_edit = named(QLineEdit(), "API key")
        self.key_edit.setPlaceholderText("none (only allowed on 127.0.0.1)")
        new_key = QPushButton("New key")
        new_key.clicked.connect(lambda: self.key_edit.setText(secrets.token_urlsafe(24)))
        key_row = QHBoxLayout()
        key_row.addWidget(self.key_edit, 1)
        key_row.addWidget(new_key)
        self.parallel_box = named(QSpinBox(), "Requests at once")
        self.parallel_box.setRange(1, 64)
        self.parallel_box.setValue(4)
        self.apply_parallel = QPushButton("Reload for this many")
        self.apply_parallel.clicked.connect(self.reload_for_parallel)
        parallel_row = QHBoxLayout()
        parallel_row.addWidget(self.parallel_box)
        parallel_row.addWidget(self.apply_parallel)
        parallel_row.addStretch(1)
        self.capacity_label = QLabel()
        self.capacity_label.setWordWrap(True)
        self.capacity_label.setObjectName("placeholderText")

        form = QFormLayout()
        form.addRow("Address", self.host_box)
        form.addRow("Port", self.port_box)
        form.addRow("API key", key_row)
        form.addRow("Requests at once", parallel_row)
        form.addRow("", self.capacity_label)

        self.start_button = QPushButton("Start server")
        self.start_button.clicked.connect(self.toggle)
        self.copy_button = QPushButton("Copy base URL")
        self.copy_button.clicked.connect(self.copy_base_url)
        self.copy_button.setEnabled(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)

        self.log_table = named(QTableWidget(0, len(COLUMNS)), "Requests")
        self.log_table.setHorizontalHeaderLabels(COLUMNS)
        self.log_table.verticalHeader().setVisible(False)
        self.log_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.log_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(32, 28, 32, 28)
        layout.setSpacing(10)
        layout.addWidget(title)
        layout.addWidget(self.status_label)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(QLabel("Requests"))
        layout.addWidget(self.log_table, 1)
        layout.addWidget(QLabel("Named API keys"))
        self.keys_panel = KeysPanel()
        layout.addWidget(self.keys_panel)
        layout.addWidget(QLabel("Outside the window"))
        self.background_panel = BackgroundPanel()
        layout.addWidget(self.background_panel)
        self._requests_per_key: collections.Counter[str] = collections.Counter()

        self.record_logged.connect(self._add_record, Qt.ConnectionType.QueuedConnection)
        bridge.model_loaded.connect(self._show_capacity)
        bridge.model_loaded.connect(self._on_model_loaded)
        bridge.engine_crashed.connect(self._on_engine_crashed)
        self._show_capacity(bridge.model)

    # -- actions --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    def toggle(self) -> None:
        if self._server is not None:
            self.stop()
        else:
            self.start()

    def _on_engine_crashed(self, _crash) -> None:
        was_on = self._server is not None
        self._stop("The engine stopped")
        if was_on:
            self.start_when_loaded = True
            self._say(f"The engine stopped, and the API server with it. {BACK_TEXT} "
                      "Use Reload model at the top of the window.")  # fmt: skip

    def _on_model_loaded(self, _loaded) -> None:
        if self.start_when_loaded and self._server is None:
            self.start_when_loaded = False
            if not self.start():
                self.status_label.setText(
                    f"The API server could not start again: {self.status_label.text()} "
                    "Change the settings here and press Start server."
                )

    def start(self) -> bool:
        model = self._bridge.model
        if model is None:
            self._say("Load a model first (Library or File › Open model…), then start the server.")
            return False
        try:
            config = ServerConfig(
                host=self.host_box.currentText().strip() or DEFAULT_HOST,
                port=self.port_box.value(),
                api_key=self.key_edit.text().strip(),
                key_store=self.keys_panel.store,
            ).check()
            log = RequestLog()
            log.subscribe(self.record_logged.emit)
            server = ServerThread(build_state(self._bridge.client, config, model, log))
            server.start()
        except (ServerConfigError, OSError) as exc:
            self._say(str(exc))
            return False
        self._server, self._config = server, config
        key_note = " Clients send the API key as 'Authorization: Bearer KEY'." if (
            config.api_key) else ""  # fmt: skip
        self._say(f"On: {config.base_url} (OpenAI), {config.base_url[:-3]}/api (Ollama), "
                  f"docs at {config.base_url[:-3]}/docs.{key_note}")  # fmt: skip
        self._set_editable(False)
        return True

    def _stop(self, why: str) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()
            self._say(f"{why}. {OFF_TEXT}")
        self._set_editable(True)

    def stop(self) -> None:
        self.start_when_loaded = False
        self._stop("Stopped")

    def copy_base_url(self) -> None:
        if self._config is not None:
            QGuiApplication.clipboard().setText(self._config.base_url)

    def reload_for_parallel(self) -> None:
        """Load the model again with room for this many requests at once (each keeps the
        context length it has now)."""
        params, model = self._bridge.reload_params(), self._bridge.model
        if params is None or model is None:
            self._say("Load a model first; then choose how many requests it answers at once.")
            return
        if self._server is not None:
            self._stop("Stopped for the reload")
            self.start_when_loaded = True
            self._say(f"Stopped for the reload. {BACK_TEXT}")
        per_request = model.n_ctx // max(1, model.n_parallel)
        n = self.parallel_box.value()
        self._bridge.load(replace(params, n_parallel=n, n_ctx=per_request * n))

    # -- what the page shows --------------------------------------------------------------------

    def _show_capacity(self, model: p.ModelLoaded | None) -> None:
        if model is None:
            self.capacity_label.setText("No model is loaded.")
            return
        per = model.n_ctx // max(1, model.n_parallel)
        # The box starts at what is loaded, so "Reload for this many" changes nothing by itself.
        self.parallel_box.setValue(max(1, model.n_parallel))
        if model.n_parallel > 1:
            text = (f"{model.n_parallel} requests decode together, each with up to {per:,} "
                    "tokens of context; more wait their turn, and past a queue of 32 get "
                    "'busy, retry' (503).")  # fmt: skip
        else:
            text = (
                f"One request at a time ({per:,} tokens of context); others wait. Reload "
                "for more to answer several at once (each needs its own KV cache)."
            )
        fit = self._parallel_that_fit(model, per)
        if fit is not None:
            count = f"{fit} or more" if fit >= MAX_PARALLEL else str(fit)
            text += (f" The planner finds room for {count} such requests at once in the memory "
                     "that was free when Hearth started.")  # fmt: skip
            self.parallel_box.setMaximum(max(1, fit, model.n_parallel))
        self.capacity_label.setText(text)

    def _parallel_that_fit(self, model: p.ModelLoaded, per_request: int) -> int | None:
        snapshot = self._machine.snapshot if self._machine is not None else None
        if snapshot is None:
            return None
        try:
            return parallel_that_fit(
                model.path, snapshot, per_request, model.type_k, engine=model.engine,
                type_v=model.type_v,
            )  # fmt: skip
        except Exception:  # a file that changed since it loaded: the count is a nicety
            return None

    def _add_record(self, record: RequestRecord) -> None:
        if record.key:
            self._requests_per_key[record.key] += 1
            self.keys_panel.show_counts(self._requests_per_key)
        table = self.log_table
        if table.rowCount() >= LOG_ROWS_KEPT:
            table.removeRow(0)
        row = table.rowCount()
        table.insertRow(row)
        speed = f"{record.tokens_per_second:.1f}" if record.tokens_per_second else "–"
        cells = (
            time.strftime("%H:%M:%S", time.localtime(record.started_at)),
            record.client,
            record.route,
            str(record.status),
            str(record.prompt_tokens),
            str(record.completion_tokens),
            speed,
            f"{record.seconds:.2f}",
        )
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if record.note:
                item.setToolTip(record.note)
            table.setItem(row, column, item)
        table.scrollToBottom()

    def _say(self, text: str) -> None:
        self.status_label.setText(text)

    def _set_editable(self, editable: bool) -> None:
        for widget in (self.host_box, self.port_box, self.key_edit):
            widget.setEnabled(editable)
        self.start_button.setText("Start server" if editable else "Stop server")
        self.copy_button.setEnabled(not editable)
