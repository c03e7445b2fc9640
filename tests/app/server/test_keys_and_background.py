"""The Server page's named keys (created, shown once, revoked, counted) and its view of a server
running outside the window (shown, and stopped with a button)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time

from app.server.background_panel import NONE_TEXT, BackgroundPanel
from app.server.keys_panel import KeysPanel
from engine.server.api_keys import KeyStore
from engine.server.service import ServerRecord, process_alive

WAIT_MS = 15_000


def test_a_key_is_created_shown_once_counted_and_revoked(qtbot, tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    panel = KeysPanel(store)
    qtbot.addWidget(panel)
    panel.name_edit.setText("laptop")
    panel.create_button.click()
    key = panel.new_key.text()
    assert key.startswith("hk-") and store.name_of(key.encode()) == "laptop"
    assert not panel.new_key.isHidden()
    assert key not in (tmp_path / "keys.json").read_text()  # only its hash is kept
    assert panel.table.rowCount() == 1 and panel.table.item(0, 0).text() == "laptop"
    panel.show_counts({"laptop": 3})
    assert panel.table.item(0, 3).text() == "3"

    panel.name_edit.setText("laptop")
    panel.create_button.click()  # the same name again: refused, said why
    assert "already a key named" in panel.message.text() and panel.table.rowCount() == 1

    panel.table.selectRow(0)
    panel.revoke_button.click()
    assert store.listed() == () and panel.table.rowCount() == 0
    assert panel.new_key.isHidden() and "revoked" in panel.message.text()


def test_a_server_running_outside_the_window_is_shown_and_stopped(qtbot, tmp_path):
    record_path = tmp_path / "running.json"
    panel = BackgroundPanel(record_path)
    qtbot.addWidget(panel)
    assert panel.label.text() == NONE_TEXT and not panel.stop_button.isEnabled()

    # a stand-in for `hearth serve --detach`: a process that runs until it is told to stop,
    # and its /health answered here
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    health = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=health.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{health.server_address[1]}/v1"
    try:
        ServerRecord(server.pid, url, time.time(), "the Library",
                     str(tmp_path / "serve.log")).write(record_path)  # fmt: skip
        panel.refresh_button.click()
        assert url in panel.label.text()
        qtbot.waitUntil(lambda: "Loaded now: gemma-3-270m." in panel.label.text(), timeout=WAIT_MS)
        assert f"process {server.pid}" in panel.label.text() and "the Library" in panel.label.text()
        assert panel.stop_button.isEnabled()

        panel.stop_button.click()
        qtbot.waitUntil(lambda: panel.label.text().startswith("Stopped."), timeout=WAIT_MS)
        assert server.wait(5) is not None and not process_alive(server.pid)
        assert not record_path.exists() and not panel.stop_button.isEnabled()
    finally:
        health.shutdown()
        health.server_close()
        if server.poll() is None:
            server.kill()
            server.wait()


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"state": "library", "models": [{"model": "gemma-3-270m"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass
