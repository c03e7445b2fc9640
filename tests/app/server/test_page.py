"""The Server page over a real engine worker with the starter model: it serves the loaded model
beside the window, logs each request, and refuses what would be unsafe."""

import http.client
import json
import socket
from types import SimpleNamespace

import pytest

from app.common.engine_bridge import EngineBridge
from app.server.page import ServerPage
from engine.enums import EngineState
from engine.hardware.records import Detection, Device
from engine.runtime import protocol as p
from engine.session import MachineSnapshot

LOAD_MS = 120_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def real_bridge(qtbot, starter_model):
    bridge = EngineBridge()
    bridge.load(p.ModelParams(path=str(starter_model), n_ctx=1024, n_parallel=2))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=LOAD_MS)
    yield bridge
    bridge.shutdown()


@pytest.fixture
def page(qtbot, real_bridge):
    page = ServerPage(real_bridge)
    qtbot.addWidget(page)
    page.port_box.setValue(_free_port())
    yield page
    page.stop()


def test_the_page_says_how_many_requests_fit(page):
    assert "2 requests decode together" in page.capacity_label.text()
    assert "512 tokens" in page.capacity_label.text()
    # the box shows what is loaded (it showed its default of 4 whatever was loaded)
    assert page.parallel_box.value() == 2


def test_the_page_says_how_many_fit_in_memory(qtbot, real_bridge):
    cpu = Device(id="cpu", vendor="other", name="CPU", kind="CPU", backends=("cpu",),
                 source="psutil", total_bytes=4 * 1024**3, free_bytes=2 * 1024**3)  # fmt: skip
    machine = SimpleNamespace(
        snapshot=MachineSnapshot(Detection(devices=(cpu,)), gpu_offload=False)
    )
    page = ServerPage(real_bridge, machine)
    qtbot.addWidget(page)
    text = page.capacity_label.text()
    assert "The planner finds room for" in text
    fit = int(text.split("room for ")[1].split()[0])
    assert fit >= 2 and page.parallel_box.maximum() == fit


def test_started_it_serves_the_windows_model_and_logs_each_request(qtbot, page):
    assert page.start(), page.status_label.text()
    assert page.running and page.start_button.text() == "Stop server"
    assert "http://127.0.0.1:" in page.status_label.text()
    conn = http.client.HTTPConnection("127.0.0.1", page.port_box.value(), timeout=60)
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "temperature": 0}
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})  # fmt: skip
    reply = json.loads(conn.getresponse().read())
    conn.close()
    assert reply["usage"]["completion_tokens"] > 0
    qtbot.waitUntil(lambda: page.log_table.rowCount() == 1, timeout=10_000)
    row = [page.log_table.item(0, c).text() for c in range(page.log_table.columnCount())]
    assert row[2] == "/v1/chat/completions" and row[3] == "200"
    assert row[5] == str(reply["usage"]["completion_tokens"])
    page.toggle()
    assert not page.running and page.start_button.text() == "Start server"


def test_another_address_without_a_key_is_refused_with_the_reason(page):
    page.host_box.setCurrentText("0.0.0.0")
    assert not page.start()
    assert "needs an API key" in page.status_label.text()
    assert not page.running
