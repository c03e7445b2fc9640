"""`hearth serve` end to end, against the two findings no stand-in can show: a console that
went away (`hearth serve | head -1`) must not fail requests, and a worker killed with SIGKILL
is started again with the model, while /health says so instead of a 500 traceback."""

import http.client
import json
import os
import signal
import subprocess
import time

import psutil
import pytest

from tests.engine.server.conftest import REPO, free_port, hearth_command, stop_process

HELLO = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}


def _request(port: int, method: str, path: str, body=None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, None if body is None else json.dumps(body),
                     {"Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def _wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_a_closed_console_and_a_killed_worker_do_not_stop_the_server(starter_model, tmp_path):
    port = free_port()
    command = hearth_command("serve", str(starter_model), "--port", str(port), "--parallel", "1",
                             "--ctx", "256")  # fmt: skip
    errors = open(tmp_path / "stderr.txt", "wb")  # noqa: SIM115
    env = {**os.environ, "PYTHONPATH": str(REPO), "HEARTH_API_KEY": ""}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, cwd=REPO, env=env)
    try:
        for line in server.stdout:  # `| head -1`: read up to the banner, then go away
            if b"Hearth API on" in line:
                break
        server.stdout.close()
        assert _wait_until(lambda: _request(port, "GET", "/api/version")[0] == 200, 30)
        status, reply = _request(port, "POST", "/v1/chat/completions", HELLO)
        assert status == 200, reply  # the log line it printed went nowhere, quietly

        worker = next(c for c in psutil.Process(server.pid).children(recursive=True)
                      if "engine.runtime.worker" in " ".join(c.cmdline()))  # fmt: skip
        os.kill(worker.pid, signal.SIGKILL)
        seen: list = []  # the 503 answer itself: the restart may be over by the next request

        def unhealthy() -> bool:
            seen[:] = _request(port, "GET", "/health")
            return seen[0] == 503

        assert _wait_until(unhealthy, 30)
        health = seen[1]
        # just killed: not answering yet, then seen as crashed and restarted
        assert health["state"] in ("not_answering", "crashed", "restarting")
        assert _wait_until(lambda: _request(port, "GET", "/health")[0] == 200, 120), health
        status, reply = _request(port, "POST", "/v1/chat/completions", HELLO)
        assert status == 200, reply
        assert server.poll() is None
    finally:
        stop_process(server)
        errors.close()
    said = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in said and "Restarting the engine" in said
