"""The window's API server across an engine crash: it stops with the engine, says so, and comes
back on the new worker once "Reload model" has loaded the model again."""

from __future__ import annotations

import socket

from app.server.page import ServerPage
from engine.enums import EngineState
from tests.app.conftest import WAIT_MS, client_of, load_fake_model


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_comes_back_with_the_reloaded_model(qtbot, bridge, starter_model):
    first = load_fake_model(qtbot, bridge, starter_model)
    page = ServerPage(bridge)
    qtbot.addWidget(page)
    page.port_box.setValue(_free_port())
    assert page.start(), page.status_label.text()
    try:
        first.crash()
        qtbot.waitUntil(lambda: bridge.state == EngineState.CRASHED, timeout=WAIT_MS)
        assert not page.running
        assert "starts again" in page.status_label.text()

        assert bridge.reload()  # what the window's "Reload model" does, less the planning
        second = client_of(bridge)
        assert second is not first
        second.emit_loaded(str(starter_model))
        qtbot.waitUntil(lambda: page.running, timeout=WAIT_MS)
        assert page.status_label.text().startswith("On: http://127.0.0.1:")
        assert second.listeners and not first.listeners  # serving the new worker
    finally:
        page.stop()
    assert not page.start_when_loaded


def test_stopped_by_the_person_it_stays_off_after_a_reload(qtbot, bridge, starter_model):
    first = load_fake_model(qtbot, bridge, starter_model)
    page = ServerPage(bridge)
    qtbot.addWidget(page)
    page.port_box.setValue(_free_port())
    assert page.start()
    page.toggle()
    first.crash()
    qtbot.waitUntil(lambda: bridge.state == EngineState.CRASHED, timeout=WAIT_MS)
    bridge.reload()
    client_of(bridge).emit_loaded(str(starter_model))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert not page.running
