"""The Hardware page: a card per GPU and the CPU, what the installed engine can use, live memory,
and helper machines lending theirs (app/hardware/helpers.py).

Nothing here blocks the GUI thread. Detection and the engine probe (a child process) run as
one-shot tasks on Qt's global thread pool and come back through queued signals. The live monitor
is a worker object on its own QThread; a timer there samples the drivers once a second (the
sampler itself refuses to go faster) while the panel is shown, and stops when it is hidden,
closed or destroyed. Tests inject a fake detection, engine view and sampler.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.common.background import TaskRunner
from app.common.machine_state import MachineState
from app.hardware.helpers import HelpersSection
from engine import hardware as hw
from engine.hardware import Detection, Device, DeviceStatus, EngineView, UsageSample
from engine.hardware.summary import bandwidth_phrase, detail_phrases, engine_phrase, memory_phrase
from engine.units import format_bytes

POLL_INTERVAL_MS = 1000

STYLE = """
QFrame#hwCard { border: 1px solid palette(mid); border-radius: 8px; background: palette(base); }
QFrame#hwHint { border: 1px solid #d08a2c; border-radius: 8px; }
QLabel#hwCardTitle { font-size: 12pt; font-weight: bold; }
QLabel#hwMuted, QLabel#hwNote { color: palette(placeholder-text); }
QLabel#hwUsable { color: #2e8b3a; }
QLabel#hwUnusable { color: #c0392b; }
"""

NO_GPU_TEXT = (
    "No GPU found, so models run on the CPU. If this computer has a GPU, its driver may be "
    "missing or not readable: hover over the probes below to see what each one found."
)

SamplerFactory = Callable[[Sequence[Device]], Any]  # -> object with sample() and close()


def _label(text: str = "", name: str | None = None, *, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setObjectName(name)
    return label


# -- background work ------------------------------------------------------------------------------


class _MonitorWorker(QObject):
    sampled = Signal(object)  # tuple[UsageSample, ...]

    def __init__(self, factory: SamplerFactory, devices: Sequence[Device], interval_ms: int):
        super().__init__()
        self._factory, self._devices, self._interval_ms = factory, tuple(devices), interval_ms
        self._sampler: Any = None
        self._timer: QTimer | None = None

    @Slot()
    def start(self) -> None:  # runs in the monitor thread, so the timer lives there too
        self._sampler = self._factory(self._devices)
        self._timer = QTimer(self)
        self._timer.setInterval(self._interval_ms)
        self._timer.timeout.connect(self._tick)
        self._timer.start()
        self._tick()

    @Slot()
    def _tick(self) -> None:
        try:
            self.sampled.emit(self._sampler.sample())
        except Exception as exc:
            self.sampled.emit(exc)

    @Slot()
    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None


_LINGERING: set[LiveMonitor] = set()


class LiveMonitor:
    """A monitor thread for one set of devices. Not a QObject child of the panel on purpose: a
    QThread destroyed while running aborts the app, so this outlives the panel until stopped."""

    def __init__(self, factory: SamplerFactory, devices: Sequence[Device], interval_ms: int):
        self.thread = QThread()
        self.thread.setObjectName("hardware-monitor")
        self.worker = _MonitorWorker(factory, devices, interval_ms)
        self.worker.moveToThread(self.thread)
        self.thread.started.connect(self.worker.start)
        self.thread.finished.connect(self.worker.stop, Qt.ConnectionType.DirectConnection)
        self.thread.start()

    def stop(self, wait_ms: int = 2000) -> None:
        if self.thread.isRunning():
            self.thread.quit()
            if not self.thread.wait(wait_ms):
                # A driver call is stuck; keep the thread object alive until it ends.
                _LINGERING.add(self)
                self.thread.finished.connect(lambda: _LINGERING.discard(self))

    @property
    def running(self) -> bool:
        return self.thread.isRunning()


# -- widgets --------------------------------------------------------------------------------------


class DeviceCard(QFrame):
    def __init__(self, device: Device, status: DeviceStatus | None, *, asking: bool = False):
        super().__init__()
        self._asking = asking
        self.setObjectName("hwCard")
        self.device = device
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(4)
        top = QHBoxLayout()
        top.addWidget(_label(device.name, "hwCardTitle"), 1)
        top.addWidget(_label(f"{device.kind.upper()} · {', '.join(device.backends)}", "hwMuted"))
        layout.addLayout(top)
        free, total = (status.free_bytes, status.total_bytes) if status else (None, None)
        self.memory = _label(memory_phrase(device, free, total))
        layout.addWidget(self.memory)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(8)
        self._set_bar(device.used_bytes, device.total_bytes)
        layout.addWidget(self.bar)
        self.live = _label("", "hwMuted")
        layout.addWidget(self.live)
        facts = [*detail_phrases(device)]
        if device.memory_bandwidth_gbps is not None:
            facts.insert(0, f"memory bandwidth {bandwidth_phrase(device)}")
        layout.addWidget(_label(" · ".join(facts), "hwMuted"))
        self.engine = _label("")
        self.set_status(status)
        layout.addWidget(self.engine)
        for note in device.notes:
            layout.addWidget(_label(f"• {note}", "hwNote"))

    def set_status(self, status: DeviceStatus | None) -> None:
        if status is None:
            self.engine.setText("Asking the engine…" if self._asking else "")
            self.engine.setObjectName("hwMuted")
        elif status.usable:
            self.engine.setText(f"✓ {status.message}")
            self.engine.setObjectName("hwUsable")
        elif status.usable is None:
            self.engine.setText(status.message)
            self.engine.setObjectName("hwMuted")
        else:
            built = f"the {status.hint.label} build" if status.hint else "another build"
            self.engine.setText(f"✗ The installed engine cannot use it; it needs {built}.")
            self.engine.setObjectName("hwUnusable")
        self.engine.style().unpolish(self.engine)
        self.engine.style().polish(self.engine)
        if status is not None:
            self.memory.setText(memory_phrase(self.device, status.free_bytes, status.total_bytes))

    def _set_bar(self, used: int | None, total: int | None) -> None:
        self.bar.setVisible(bool(total) and used is not None)
        if total and used is not None:
            self.bar.setValue(round(1000 * used / total))

    def show_sample(self, sample: UsageSample) -> None:
        self._set_bar(sample.used_bytes, sample.total_bytes)
        if sample.total_bytes:
            self.memory.setText(memory_phrase(self.device, sample.free_bytes, sample.total_bytes))
        parts = []
        if sample.used_bytes is not None and sample.total_bytes:
            parts.append(f"{format_bytes(sample.used_bytes)} in use")
        if sample.utilization_percent is not None:
            parts.append(f"{sample.utilization_percent:.0f}% busy")
        if sample.note:
            parts.append(sample.note)
        self.live.setText("Now: " + " · ".join(parts) if parts else "")


class BuildHint(QFrame):
    """Which engine build to install for a GPU, the command, and a button to copy it."""

    def __init__(self, status: DeviceStatus):
        super().__init__()
        self.setObjectName("hwHint")
        hint = status.hint
        assert hint is not None
        self.command = hint.command
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        name = html.escape(status.device.name)
        if status.usable:
            title = f"A faster engine build exists for {name}"
        else:
            title = f"Install the {hint.label} build to use {name}"
        text = _label(
            f"<b>{title}</b><br>{html.escape(status.reason)} Building it needs "
            f"{html.escape(hint.needs)}; then run:<br><code>{html.escape(self.command)}</code>"
        )
        text.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(text, 1)
        copy = QPushButton("Copy command")
        copy.setToolTip(f"{self.command}\nCMake flags: {hint.cmake_env}")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.command))
        layout.addWidget(copy, 0, Qt.AlignmentFlag.AlignTop)


class HardwarePanel(QWidget):
    """Device cards, the engine's view, build hints and a live monitor at most once a second."""

    detection_ready = Signal(object)  # Detection
    engine_ready = Signal(object)  # EngineView
    samples_ready = Signal(object)  # tuple[UsageSample, ...]

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        detect_fn: Callable[[], Detection] = hw.detect,
        engine_probe_fn: Callable[[], EngineView] | None = hw.probe_engine_devices,
        sampler_factory: SamplerFactory = hw.UsageSampler,
        poll_interval_ms: int = POLL_INTERVAL_MS,
        autostart: bool = True,
        machine: MachineState | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("hardwarePanel")
        self.setStyleSheet(STYLE)
        self._detect_fn, self._engine_probe_fn = detect_fn, engine_probe_fn
        self._sampler_factory, self._poll_interval_ms = sampler_factory, poll_interval_ms
        self.detection: Detection | None = None
        self.engine_view: EngineView | None = None
        self.statuses: list[DeviceStatus] = []
        self.cards: dict[str, DeviceCard] = {}
        self.hints: list[BuildHint] = []
        self.monitor: LiveMonitor | None = None
        self._tasks = TaskRunner(self)
        # The window's shared snapshot, when there is one: detection runs once for all pages.
        self._machine = machine
        if machine is not None:
            # A bound method, not a lambda: Qt drops the connection when this page is deleted
            # (a lambda outlived it and touched deleted widgets when the snapshot changed).
            machine.changed.connect(self._on_machine_changed)
        self._build()
        # Stop the monitor thread however this page ends; the closure holds no reference to self.
        monitor_box = self._monitor_box = [None]
        self.destroyed.connect(lambda *_: monitor_box[0] and monitor_box[0].stop())
        app = QGuiApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.stop_monitor)
        if autostart:
            self.refresh()

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 20, 24, 20)
        outer.setSpacing(10)
        header = QHBoxLayout()
        title = _label("Hardware", wrap=False)
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.5)
        font.setBold(True)
        title.setFont(font)
        header.addWidget(title)
        self.summary = _label("Detecting GPUs…", "hwMuted")
        header.addWidget(self.summary, 1)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        header.addWidget(self.refresh_button)
        outer.addLayout(header)
        self.engine_label = _label("", "hwMuted")
        outer.addWidget(self.engine_label)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget()
        self.body_layout = QVBoxLayout(body)
        self.body_layout.setContentsMargins(0, 0, 0, 0)
        self.body_layout.setSpacing(10)
        self.helpers = HelpersSection()
        # A helper added or removed: take the snapshot again, so plans see it (or stop to).
        self.helpers.helpers_changed.connect(self._on_helpers_changed)
        self.body_layout.addWidget(self.helpers)
        self.body_layout.addStretch(1)
        scroll.setWidget(body)
        outer.addWidget(scroll, 1)
        self.probes_label = _label("", "hwNote")
        outer.addWidget(self.probes_label)

    # -- detection and the engine's view ---------------------------------------------------------

    def _run(self, fn: Callable[[], Any], done: Callable[[Any], None]) -> None:
        self._tasks.run(fn, done)

    @Slot()
    def refresh(self) -> None:
        self.refresh_button.setEnabled(False)
        self.summary.setText("Detecting GPUs…")
        if self._machine is None:
            self._run(self._detect_fn, self._on_detected)
        elif self._machine.snapshot is not None and self.detection is None:
            self._on_detected(self._machine.snapshot.detection)  # the first look: already taken
        else:
            self._machine.refresh()
        if self._engine_probe_fn is not None:
            self.engine_label.setText("Asking the installed engine which devices it can use…")
            self._run(self._engine_probe_fn, self._on_engine)

    def _on_machine_changed(self, snapshot) -> None:
        self.helpers.show_helpers(snapshot.helpers, snapshot.helper_problems)
        self._on_detected(snapshot.detection)

    def _on_helpers_changed(self) -> None:
        if self._machine is not None:
            self._machine.refresh()

    def _on_detected(self, detection: Detection | Exception) -> None:
        self.refresh_button.setEnabled(True)
        if isinstance(detection, Exception):
            self.summary.setText(f"Detection failed: {detection}")
            return
        self.detection = detection
        gpus = len(detection.gpus)
        took = detection.elapsed_s * 1000
        self.summary.setText(f"{gpus} GPU{'s' if gpus != 1 else ''} · detected in {took:.0f} ms")
        self.probes_label.setToolTip(
            "\n".join(f"{p.name}: {p.status} — {p.message}" for p in detection.probes)
        )
        self.probes_label.setText(
            "Probes: "
            + " · ".join(f"{p.name} {p.status.replace('_', ' ')}" for p in detection.probes)
            + "".join(f"\n{note}" for note in detection.notes)
        )
        self._rebuild()
        self.restart_monitor()
        self.detection_ready.emit(detection)

    def _on_engine(self, view: EngineView | Exception) -> None:
        if isinstance(view, Exception):
            view = EngineView.failed(f"{type(view).__name__}: {view}")
        self.engine_view = view
        self.engine_label.setText(engine_phrase(view))
        self._rebuild()
        self.engine_ready.emit(view)

    def _rebuild(self) -> None:
        if self.detection is None:
            return
        devices = list(self.detection.devices)
        self.statuses = hw.reconcile(devices, self.engine_view) if self.engine_view else []
        by_id = {s.device.id: s for s in self.statuses}
        known = {d.id for d in devices}
        shown = devices + [s.device for s in self.statuses if s.device.id not in known]
        while self.body_layout.count() > 2:  # everything but the helpers and the stretch
            widget = self.body_layout.takeAt(0).widget()
            if widget is not None:
                widget.deleteLater()
        self.hints = [BuildHint(s) for s in self.statuses if s.hint is not None]
        asking = self._engine_probe_fn is not None and self.engine_view is None
        self.cards = {d.id: DeviceCard(d, by_id.get(d.id), asking=asking) for d in shown}
        widgets: list[QWidget] = [*self.hints, *self.cards.values()]
        if not any(d.is_gpu for d in shown):
            widgets.insert(0, _label(NO_GPU_TEXT, "hwNoGpu"))
        for widget in widgets:
            self.body_layout.insertWidget(self.body_layout.count() - 2, widget)

    # -- live monitor ------------------------------------------------------------------------------

    def restart_monitor(self) -> None:
        self.stop_monitor()
        if self.detection is None or not self.isVisible():
            return
        self.monitor = LiveMonitor(
            self._sampler_factory, self.detection.devices, self._poll_interval_ms
        )
        self._monitor_box[0] = self.monitor
        self.monitor.worker.sampled.connect(self._on_samples, Qt.ConnectionType.QueuedConnection)

    @Slot()
    def stop_monitor(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
            self._monitor_box[0] = None

    def _on_samples(self, samples: Sequence[UsageSample] | Exception) -> None:
        if isinstance(samples, Exception):
            self.probes_label.setText(f"Live figures stopped: {samples}")
            return
        for sample in samples:
            card = self.cards.get(sample.device_id)
            if card is not None:
                card.show_sample(sample)
        self.samples_ready.emit(samples)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if self.monitor is None and self.detection is not None:
            self.restart_monitor()

    def hideEvent(self, event: Any) -> None:
        self.stop_monitor()
        super().hideEvent(event)

    def closeEvent(self, event: Any) -> None:
        self.stop_monitor()
        super().closeEvent(event)
