"""The model settings panel as a page: it waits for the machine snapshot (detected once, off the
GUI thread, shared by every page) and shows the load policy's decision for each model the
window opens.

    PageSpec("Model", lambda window: ModelSettingsPage(window.bridge, window.machine,
                                                       opener=window.opener))
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QLabel, QMessageBox, QVBoxLayout, QWidget

from app.common.machine_state import MachineState
from app.model.kv_check import KvCheckRunner
from app.model.panel import CANCEL, LOAD_AND_REMEMBER, LOAD_ONCE, SettingsPanel
from engine.session import LoadDecision, MachineSnapshot, RememberedSettings
from engine.session.memory_check import memory_check_text


class ModelSettingsPage(QWidget):
    def __init__(
        self,
        bridge,
        machine: MachineState,
        *,
        remembered: RememberedSettings | None = None,
        opener=None,  # app.shell.model_opener.ModelOpener: its decisions are shown here
        kv_check: KvCheckRunner | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("modelSettingsPage")
        self._bridge = bridge
        self._remembered = remembered or (opener.remembered if opener else RememberedSettings())
        self._opener = opener
        self.panel: SettingsPanel | None = None
        self._pending: LoadDecision | None = None
        self.message = QLabel("Looking at your hardware…")
        self.message.setObjectName("placeholderText")
        self.message.setWordWrap(True)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(32, 28, 32, 28)
        self._layout.addWidget(self.message)
        # After a load: the plan's memory beside what the engine measured (memory_check.py)
        self.memory_check = QLabel()
        self.memory_check.setObjectName("memoryCheck")
        self.memory_check.setWordWrap(True)
        self.memory_check.setContentsMargins(32, 0, 32, 0)
        self.memory_check.hide()
        self._layout.addWidget(self.memory_check)
        # The loaded model's own KV check (kv_check.py), measured in the background
        self.kv_quality = QLabel()
        self.kv_quality.setObjectName("kvQuality")
        self.kv_quality.setWordWrap(True)
        self.kv_quality.setContentsMargins(32, 0, 32, 0)
        self.kv_quality.hide()
        self._layout.addWidget(self.kv_quality)
        self._layout.addStretch(1)
        self.kv_check = kv_check or KvCheckRunner(self)
        self.kv_check.started.connect(self._on_kv_check_started)
        self.kv_check.finished.connect(self._show_kv_quality)
        bridge.model_loaded.connect(self._on_model_loaded)
        if opener is not None:
            opener.decided.connect(self.show_decision)
            if opener.last_decision is not None:
                self._pending = opener.last_decision
        machine.changed.connect(self._on_machine)
        if machine.snapshot is not None:
            self._on_machine(machine.snapshot)
        elif not machine.detecting:
            machine.refresh()

    def _on_machine(self, snapshot: MachineSnapshot) -> None:
        if self.panel is not None:
            self.panel.set_machine(snapshot)
            return
        self.panel = SettingsPanel(
            self._bridge,
            snapshot,
            remembered=self._remembered,
            confirm_over_budget=self._confirm_over_budget,
            prepare_load=self._prepare_load,
            confirm_stop_reply=self._confirm_stop_reply,
        )
        self._layout.insertWidget(0, self.panel)
        self._layout.setContentsMargins(0, 0, 0, 0)  # the panel has its own margins
        self.message.setContentsMargins(32, 28, 32, 0)  # the message keeps the page's
        self.message.setText("Load a model (File › Open model…) to see and change its settings.")
        self.panel.setVisible(False)
        if self._pending is not None:
            self.show_decision(self._pending)

    def _shows_the_loaded_model(self) -> bool:
        loaded = self._bridge.model
        shown = self.panel.decision if self.panel is not None else self._pending
        return (
            loaded is not None
            and shown is not None
            and Path(loaded.path).resolve() == shown.path.resolve()
        )

    def _on_model_loaded(self, loaded) -> None:
        """The line that sets the plan's memory beside the load's measured memory."""
        plan = self.panel.plan if self.panel is not None else None
        text = memory_check_text(plan.devices, loaded) if plan is not None else ""
        if text and not self._shows_the_loaded_model():
            text = ""  # the page shows another file's plan: no comparison to make
        self.memory_check.setText(f"After loading: {text}" if text else "")
        self.memory_check.setVisible(bool(text))
        self.kv_check.check(loaded.path)

    def _on_kv_check_started(self, _path: str) -> None:
        self._show_kv_quality(
            "Checking how each KV cache type affects this model (in the background; Best fit "
            "uses the result from then on)…"
        )

    def _show_kv_quality(self, text: str) -> None:
        self.kv_quality.setText(text)
        self.kv_quality.setVisible(bool(text))

    def _prepare_load(self, params):
        if self._opener is None:
            return params
        return self._opener.preferences().with_preferences(params)

    def show_decision(self, decision: LoadDecision) -> None:
        if not decision.fits and self._shows_the_loaded_model():
            return  # a refused file is not loaded: the page stays on the model that is
        if self.panel is None:
            self._pending = decision
            return
        self._pending = None
        self.panel.show_decision(decision)
        self.message.hide()
        self.panel.show()

    def _confirm_stop_reply(self) -> bool:
        answer = QMessageBox.question(
            self,
            "A reply is being written",
            "Reloading the model stops the reply being written (what it wrote so far is kept). "
            "Reload now?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel,
        )
        return answer == QMessageBox.StandardButton.Yes

    def _confirm_over_budget(self, warning: str) -> str:
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("These settings do not fit")
        box.setText("These settings need more memory than is free.")
        box.setInformativeText(
            warning + " Load anyway? Hearth will not remember these settings unless you ask it to."
        )
        once = box.addButton("Load once", QMessageBox.ButtonRole.AcceptRole)
        remember = box.addButton("Load and remember", QMessageBox.ButtonRole.AcceptRole)
        cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(cancel)
        box.exec()
        clicked = box.clickedButton()
        return {once: LOAD_ONCE, remember: LOAD_AND_REMEMBER}.get(clicked, CANCEL)
