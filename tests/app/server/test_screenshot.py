"""The window's chat answers while API clients stream from the same worker; then the Server page
with their requests in its log, grabbed as a picture.

It always runs (into a temporary folder); with HEARTH_SCREENSHOTS=1 it rewrites
docs/screenshots/server.png:

    HEARTH_SCREENSHOTS=1 QT_QPA_PLATFORM=offscreen \
        .venv/bin/pytest tests/app/server/test_screenshot.py
"""

from __future__ import annotations

import http.client
import json
import os
import threading
from pathlib import Path

from PySide6.QtCore import Qt

from app.shell.pages import SERVER
from engine.enums import EngineState
from engine.runtime import protocol as p
from tests.app.conftest import real_engine_window
from tests.app.server.test_page import _free_port

SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "screenshots" / "server.png"
CLIENTS = 4


def _stream(port: int, index: int, results: dict) -> None:
    body = {"messages": [{"role": "user", "content": f"Tell me fact number {index} about owls."}],
            "max_tokens": 40, "temperature": 0, "stream": True}  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})  # fmt: skip
    lines = conn.getresponse().read().decode().splitlines()
    conn.close()
    results[index] = [line for line in lines if line.startswith("data: ")]


def test_the_chat_answers_beside_api_clients_and_the_page_logs_them(
    qtbot, real_engine, starter_model, tmp_path
):
    target = SCREENSHOT if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / "server.png"
    with real_engine_window(qtbot, starter_model) as window:
        bridge, page = window.bridge, window.page(SERVER)
        try:
            page.parallel_box.setValue(CLIENTS + 1)  # the window's chat gets a sequence too
            page.reload_for_parallel()
            qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE and bridge.model is not None
                            and bridge.model.n_parallel == CLIENTS + 1, timeout=60_000)  # fmt: skip
            page.port_box.setValue(_free_port())
            assert page.start(), page.status_label.text()

            results: dict[int, list[str]] = {}
            threads = [threading.Thread(target=_stream, args=(page.port_box.value(), i, results))
                       for i in range(CLIENTS)]  # fmt: skip
            for thread in threads:
                thread.start()
            chat = window.chat_view
            chat.sampling = p.SamplingParams(temperature=0)
            chat.max_tokens = 40
            chat.input.setPlainText("What is the capital of France?")
            qtbot.keyClick(chat.input, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: not chat.generating, timeout=120_000)
            assert chat.model.entries()[-1].text.strip()
            for thread in threads:
                thread.join(timeout=120)
            assert sorted(results) == list(range(CLIENTS))
            assert all(lines[-1] == "data: [DONE]" for lines in results.values())
            qtbot.waitUntil(lambda: page.log_table.rowCount() == CLIENTS, timeout=10_000)

            window.show_page(SERVER)
            qtbot.wait(200)
            target.parent.mkdir(parents=True, exist_ok=True)
            assert window.grab().save(str(target))
        finally:
            page.stop()
