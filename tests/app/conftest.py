"""Fixtures for the GUI tests: a bridge over a fake engine, and the real worker when it exists."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest

from app.common.engine_bridge import EngineBridge
from engine.enums import EngineState
from tests.app.fake_engine import FakeEngineClient

WAIT_MS = 5_000  # events from the fake engine: they only wait for the 33 ms flush
GIB = 1024**3


def cpu_only_detection(free_gib: float = 16.0):
    """A detection of a machine with no GPU and `free_gib` of free RAM (no probe runs)."""
    from engine.hardware import Detection, Device
    from engine.hardware.records import CPU

    cpu = Device(
        id="cpu", vendor="other", name="Test CPU", kind=CPU, backends=("cpu",),
        source="psutil", total_bytes=int((free_gib + 2) * GIB), free_bytes=int(free_gib * GIB),
        memory_bandwidth_gbps=50.0,
    )  # fmt: skip
    return Detection(devices=(cpu,))


def make_window(qtbot, bridge, tmp_path, detection=None):
    """A main window over the fake engine, a made-up machine and its own remembered settings."""
    from app.common.machine_state import MachineState
    from app.shell.main_window import MainWindow
    from engine.session import RememberedSettings

    found = detection or cpu_only_detection()
    win = MainWindow(
        bridge,
        machine=MachineState(detect_fn=lambda: found),
        remembered=RememberedSettings(tmp_path / "model-settings.json"),
    )
    qtbot.addWidget(win)
    return win


def show_at(qtbot, widget, width: int, height: int):
    """`widget` resized, shown and exposed (its layout is the real one), and returned."""
    widget.resize(width, height)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def shown(qtbot, widget, width: int, height: int):
    """`widget` owned by the test (closed at its end), shown at `width` x `height`."""
    qtbot.addWidget(widget)
    return show_at(qtbot, widget, width, height)


@pytest.fixture
def fake_clients():
    FakeEngineClient.instances.clear()
    yield FakeEngineClient.instances
    FakeEngineClient.instances.clear()


@pytest.fixture
def bridge(qtbot, fake_clients) -> EngineBridge:
    bridge = EngineBridge(client_factory=FakeEngineClient)
    yield bridge
    bridge.shutdown()


def client_of(bridge: EngineBridge) -> FakeEngineClient:
    return FakeEngineClient.instances[-1]


def load_fake_model(qtbot, bridge: EngineBridge, path: str | Path) -> FakeEngineClient:
    """Have the bridge load `path` and the fake engine report it loaded."""
    from engine.runtime import protocol as p

    bridge.load(p.ModelParams(path=str(path)))
    client = client_of(bridge)
    client.emit_loaded(str(path))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    return client


def open_in_window(qtbot, window, path: str | Path, n_ctx: int | None = None) -> FakeEngineClient:
    """Open `path` in the window as a person would, wait for the load policy to send its load
    to the fake engine, and have the engine report it loaded (with the planned context)."""
    client = client_of(window.bridge)
    before = len(client.loads())
    assert window.open_model_file(path)
    qtbot.waitUntil(lambda: len(client_of(window.bridge).loads()) > before, timeout=WAIT_MS)
    client = client_of(window.bridge)
    params = client.loads()[-1]
    client.emit_loaded(str(path), n_ctx or params.n_ctx)
    qtbot.waitUntil(lambda: window.bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    return client


@pytest.fixture(scope="session")
def real_engine() -> None:
    """Skip unless the engine worker and llama.cpp's bindings are installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    if importlib.util.find_spec("engine.runtime.worker") is None:
        pytest.skip("the engine worker (engine.runtime.worker) does not exist yet")


def open_on_real_engine(qtbot, model_path, *, size=None, bridge=None, load_ms=60_000):
    """A main window on the real engine (its own worker process) with `model_path` loaded,
    shown at `size` (width, height; None: not shown). The caller shuts its bridge down."""
    from app.shell.main_window import MainWindow

    bridge = bridge or EngineBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    if size is not None:
        window.resize(*size)
        window.show()
    bridge.start()
    window.load_model(model_path)
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=load_ms)
    return window


@contextlib.contextmanager
def real_engine_window(qtbot, model_path, *, size=(1100, 760), bridge=None, load_ms=60_000):
    """open_on_real_engine in the app's theme, its worker shut down afterwards (also when the
    load fails)."""
    from PySide6.QtWidgets import QApplication

    from app.common.theme import apply_theme

    apply_theme(QApplication.instance())
    bridge = bridge or EngineBridge()
    try:
        yield open_on_real_engine(qtbot, model_path, size=size, bridge=bridge, load_ms=load_ms)
    finally:
        bridge.shutdown()
