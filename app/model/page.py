"""The model settings panel as a page: it waits for the hardware to be detected (off the GUI
thread: probes may take seconds) and for a model to be loaded, then shows that model's settings.

    PageSpec("Model", lambda window: ModelSettingsPage(window.bridge))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.common.background import TaskRunner
from app.common.file_text import show_plain
from app.model.panel import SettingsPanel, gpus_from_devices
from app.model.settings_store import ModelSettingsStore, default_settings_path


def _detect_devices() -> list:
    from engine.hardware.detection import detect_devices

    return detect_devices()


def _detect_or_nothing(detect: Callable[[], Sequence]) -> list:
    try:
        return list(detect())
    except Exception:  # a probe that fails leaves a CPU-only plan, never a dead page
        return []


class ModelSettingsPage(QWidget):
    def __init__(
        self,
        bridge,
        *,
        detect: Callable[[], Sequence] = _detect_devices,
        settings_store: ModelSettingsStore | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("modelSettingsPage")
        self._bridge = bridge
        self._store = settings_store or ModelSettingsStore(default_settings_path())
        self.panel: SettingsPanel | None = None
        self._pending_model: str | None = None
        self.message = QLabel("Looking at your hardware…")
        self.message.setObjectName("placeholderText")
        self.message.setWordWrap(True)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(32, 28, 32, 28)
        self._layout.addWidget(self.message)
        self._layout.addStretch(1)
        bridge.model_loaded.connect(lambda loaded: self.show_model(loaded.path))
        self._tasks = TaskRunner(self)
        self._tasks.run(lambda: _detect_or_nothing(detect), self._on_devices)

    def _on_devices(self, devices: list) -> None:
        host = next((d.free_bytes for d in devices if not d.is_gpu), None)
        self.panel = SettingsPanel(
            self._bridge, gpus_from_devices(devices), host_budget_bytes=host,
            settings_store=self._store,
        )  # fmt: skip
        self._layout.insertWidget(0, self.panel)
        self._layout.setContentsMargins(0, 0, 0, 0)  # the panel has its own margins
        self.message.setContentsMargins(32, 28, 32, 0)  # the message keeps the page's
        self.message.setText("Load a model (File › Open model…) to see and change its settings.")
        self.panel.setVisible(False)
        loaded = self._bridge.model
        model = self._pending_model or (loaded.path if loaded else None)
        if model:
            self.show_model(model)

    def params_for(self, path: str | Path):
        """How to load `path`: its remembered settings, else the planner's best fit for this
        machine; None until the hardware is known or when no setting fits (the window then
        loads llama.cpp's defaults)."""
        if self.panel is None:
            return None
        self.show_model(str(path))
        plan = self.panel.plan
        if plan is None or not plan.fits or self.panel.model_path != Path(path):
            return None
        return plan.settings.model_params()

    def show_model(self, path: str) -> None:
        if self.panel is None:
            self._pending_model = path
            return
        if self.panel.model_path is not None and Path(path) == self.panel.model_path:
            return  # reloaded with the panel's own settings: nothing to re-read
        try:
            self.panel.set_model(path)
        except Exception as exc:  # a header the planner cannot read: say so, keep the page
            show_plain(
                self.message,
                f"Can't plan for {Path(path).name}: {exc}. Its settings can't be changed here; "
                "it still runs with the settings it was loaded with.",
            )
            self.message.show()
            self.panel.hide()
            return
        self.message.hide()
        self.panel.show()
