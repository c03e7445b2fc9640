"""Fixtures for the GUI tests: a bridge over a fake engine, and the real worker when it exists."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from app.common.engine_bridge import STATE_IDLE, EngineBridge
from tests.app.fake_engine import FakeEngineClient

WAIT_MS = 5_000  # events from the fake engine: they only wait for the 33 ms flush


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
    from app.shell.main_window import model_params_for

    bridge.load(model_params_for(path))
    client = client_of(bridge)
    client.emit_loaded(str(path))
    qtbot.waitUntil(lambda: bridge.state == STATE_IDLE, timeout=WAIT_MS)
    return client


@pytest.fixture(scope="session")
def real_engine() -> None:
    """Skip unless the engine worker and llama.cpp's bindings are installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    if importlib.util.find_spec("engine.runtime.worker") is None:
        pytest.skip("the engine worker (engine.runtime.worker) does not exist yet")
