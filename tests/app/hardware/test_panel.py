"""The Hardware panel over an injected detection, engine view and sampler (no real drivers)."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel

from app.hardware.panel import POLL_INTERVAL_MS, HardwarePanel
from engine.hardware import Detection, Device, EngineDevice, EngineView, UsageSample
from engine.hardware.records import GIB, OK, CpuDetails, PcieLink, ProbeReport

WAIT_MS = 5_000

RTX = Device(
    id="nvidia:0000:01:00.0",
    vendor="nvidia",
    name="NVIDIA GeForce RTX 4090",
    kind="gpu",
    backends=("cuda", "vulkan"),
    source="nvml",
    total_bytes=24 * GIB,
    free_bytes=22 * GIB,
    used_bytes=2 * GIB,
    compute_capability="8.9",
    memory_bandwidth_gbps=1008.1,
    bandwidth_source="driver",
    pcie=PcieLink(4, 16, 4, 16),
    pci_bus_id="0000:01:00.0",
    driver_version="550.54.14",
)
CPU = Device(
    id="cpu",
    vendor="amd",
    name="AMD Ryzen 9 7950X 16-Core Processor",
    kind="cpu",
    backends=("cpu",),
    source="psutil",
    total_bytes=64 * GIB,
    free_bytes=40 * GIB,
    used_bytes=24 * GIB,
    cpu=CpuDetails(16, 32, ("AVX2", "AVX-512")),
)
DETECTION = Detection(
    devices=(RTX, CPU),
    probes=(ProbeReport("nvml", OK, "1 NVIDIA GPU(s)", 0.03, 1),),
    elapsed_s=0.042,
)
CPU_BUILD = EngineView(
    backends=("CPU",),
    devices=(EngineDevice("CPU", CPU.name, "cpu", "CPU", 40 * GIB, 64 * GIB),),
    llama_cpp_version="0.3.36",
)


class FakeSampler:
    instances: ClassVar[list[FakeSampler]] = []

    def __init__(self, devices):
        self.devices = list(devices)
        self.threads: list[threading.Thread] = []
        self.closed = False
        self.used = 5 * GIB
        FakeSampler.instances.append(self)

    def sample(self):
        self.threads.append(threading.current_thread())
        now = time.monotonic()
        return (
            UsageSample(RTX.id, now, self.used, 24 * GIB - self.used, 24 * GIB, 81.0),
            UsageSample(CPU.id, now, 24 * GIB, 40 * GIB, 64 * GIB, 12.0),
        )

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def _fresh_samplers():
    FakeSampler.instances.clear()
    yield
    FakeSampler.instances.clear()


def make_panel(qtbot, *, detection=DETECTION, engine=CPU_BUILD, interval_ms=50, **kwargs):
    panel = HardwarePanel(
        detect_fn=kwargs.pop("detect_fn", lambda: detection),
        engine_probe_fn=kwargs.pop("engine_probe_fn", lambda: engine),
        sampler_factory=FakeSampler,
        poll_interval_ms=interval_ms,
        **kwargs,
    )
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    return panel


def wait_ready(qtbot, panel):
    qtbot.waitUntil(
        lambda: panel.detection is not None and panel.engine_view is not None, timeout=WAIT_MS
    )


def texts(widget) -> str:
    return "\n".join(label.text() for label in widget.findChildren(QLabel))


def test_cards_engine_view_and_the_build_to_install(qtbot):
    panel = make_panel(qtbot)
    wait_ready(qtbot, panel)
    assert list(panel.cards) == [RTX.id, CPU.id]
    shown = texts(panel)
    assert "NVIDIA GeForce RTX 4090" in shown and "AMD Ryzen 9 7950X" in shown
    assert "1 GPU · detected in 42 ms" in shown
    assert "Engine: llama-cpp-python 0.3.36, backends CPU; GPU offload no" in shown
    assert "compute capability 8.9" in shown and "PCIe Gen4 x16" in shown
    assert "1008 GB/s" in shown
    (hint,) = panel.hints
    assert hint.command == "HEARTH_BACKEND=cuda make run"
    assert "cannot use this GPU" in texts(hint)
    assert "✗" in panel.cards[RTX.id].engine.text()
    assert "✓" in panel.cards[CPU.id].engine.text()


def test_copy_command_puts_it_on_the_clipboard(qtbot):
    panel = make_panel(qtbot)
    wait_ready(qtbot, panel)
    from PySide6.QtWidgets import QPushButton

    button = next(b for b in panel.hints[0].findChildren(QPushButton) if b.text() == "Copy command")
    button.click()
    assert QGuiApplication.clipboard().text() == "HEARTH_BACKEND=cuda make run"


def test_detection_runs_off_the_gui_thread_and_the_gui_stays_responsive(qtbot):
    release = threading.Event()
    ran_on = []

    def slow_detect():
        ran_on.append(threading.current_thread())
        release.wait(5)
        return DETECTION

    panel = make_panel(qtbot, detect_fn=slow_detect)
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    qtbot.waitUntil(lambda: len(ticks) >= 10, timeout=WAIT_MS)  # the event loop keeps turning
    assert panel.detection is None and "Detecting" in panel.summary.text()
    release.set()
    wait_ready(qtbot, panel)
    timer.stop()
    assert ran_on and ran_on[0] is not threading.main_thread()


def test_live_samples_update_the_cards_from_a_worker_thread(qtbot):
    panel = make_panel(qtbot)
    wait_ready(qtbot, panel)
    qtbot.waitUntil(lambda: "81% busy" in panel.cards[RTX.id].live.text(), timeout=WAIT_MS)
    assert "5.0 GiB in use" in panel.cards[RTX.id].live.text()
    assert panel.cards[RTX.id].bar.value() == round(1000 * 5 / 24)
    sampler = FakeSampler.instances[-1]
    assert sampler.threads and all(t is not threading.main_thread() for t in sampler.threads)
    sampler.used = 12 * GIB
    qtbot.waitUntil(lambda: "12.0 GiB in use" in panel.cards[RTX.id].live.text(), timeout=WAIT_MS)


def test_default_polling_is_at_most_once_a_second(qtbot):
    panel = make_panel(qtbot, interval_ms=POLL_INTERVAL_MS)
    wait_ready(qtbot, panel)
    qtbot.waitUntil(lambda: bool(FakeSampler.instances[-1:]), timeout=WAIT_MS)
    qtbot.wait(2200)
    calls = len(FakeSampler.instances[-1].threads)
    assert POLL_INTERVAL_MS >= 1000
    assert 2 <= calls <= 4  # one at start, then one a second


def test_monitor_stops_when_hidden_or_closed_and_resumes_when_shown(qtbot):
    panel = make_panel(qtbot)
    wait_ready(qtbot, panel)
    qtbot.waitUntil(lambda: panel.monitor is not None, timeout=WAIT_MS)
    first = panel.monitor
    panel.hide()
    assert panel.monitor is None and not first.running
    assert FakeSampler.instances[-1].closed
    panel.show()
    qtbot.waitUntil(lambda: panel.monitor is not None and panel.monitor.running, timeout=WAIT_MS)
    second = panel.monitor
    panel.close()
    assert not second.running


def test_destroying_the_panel_stops_its_monitor_thread(qtbot):
    panel = HardwarePanel(
        detect_fn=lambda: DETECTION,
        engine_probe_fn=lambda: CPU_BUILD,
        sampler_factory=FakeSampler,
        poll_interval_ms=50,
    )
    panel.show()
    qtbot.waitUntil(lambda: panel.monitor is not None and panel.monitor.running, timeout=WAIT_MS)
    monitor = panel.monitor
    panel.deleteLater()
    qtbot.waitUntil(lambda: not monitor.running, timeout=WAIT_MS)


def test_an_engine_that_cannot_be_asked_is_shown(qtbot):
    failed = EngineView.failed("The engine probe exited with status 1 without an answer.")
    panel = make_panel(qtbot, engine=failed)
    wait_ready(qtbot, panel)
    assert "Engine: not asked" in panel.engine_label.text()
    assert panel.hints == []
    assert "Unknown whether the engine can use it" in panel.cards[RTX.id].engine.text()


def test_a_gpu_only_the_engine_sees_gets_a_card(qtbot):
    arc = EngineDevice("Vulkan0", "Intel Arc A770", "gpu", "Vulkan", 15 * GIB, 16 * GIB)
    view = EngineView(
        backends=("Vulkan", "CPU"), devices=(arc, *CPU_BUILD.devices), gpu_offload=True
    )
    panel = make_panel(qtbot, detection=Detection(devices=(CPU,)), engine=view)
    wait_ready(qtbot, panel)
    assert "engine:Vulkan0" in panel.cards
    assert "No GPU found" not in texts(panel)  # the engine found one
    assert "15.0 GiB free of 16.0 GiB" in texts(panel.cards["engine:Vulkan0"])


def test_a_detection_bug_is_reported_on_the_page(qtbot):
    def broken():
        raise RuntimeError("boom")

    panel = make_panel(qtbot, detect_fn=broken)
    qtbot.waitUntil(lambda: "Detection failed: boom" in panel.summary.text(), timeout=WAIT_MS)
    assert panel.refresh_button.isEnabled()


def test_refresh_detects_again(qtbot):
    calls = []

    def counting():
        calls.append(1)
        return DETECTION

    panel = make_panel(qtbot, detect_fn=counting)
    wait_ready(qtbot, panel)
    panel.refresh_button.click()
    qtbot.waitUntil(lambda: len(calls) == 2, timeout=WAIT_MS)


def test_no_gpu_says_so_and_points_at_the_probes(qtbot):
    report = ProbeReport("nvml", "unavailable", "NVML: NVML Shared Library Not Found")
    panel = make_panel(qtbot, detection=Detection(devices=(CPU,), probes=(report,)))
    wait_ready(qtbot, panel)
    assert "No GPU found, so models run on the CPU" in texts(panel)
    assert "0 GPUs" in panel.summary.text()
    assert "NVML Shared Library Not Found" in panel.probes_label.toolTip()


def test_without_the_engine_probe_the_cards_do_not_wait_for_it(qtbot):
    panel = make_panel(qtbot, engine_probe_fn=None)
    qtbot.waitUntil(lambda: panel.detection is not None, timeout=WAIT_MS)
    assert panel.engine_view is None and panel.hints == []
    assert panel.cards[RTX.id].engine.text() == ""
    assert "Asking" not in texts(panel)
