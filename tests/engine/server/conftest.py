"""A running `hearth serve` on the starter model, shared by the server tests of a session.

It listens on 127.0.0.1 only, on a free port, with an API key (so every test also goes through
the key check), 4 parallel sequences of 512 tokens. Every wait is bounded.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

API_KEY = "test-key-0123456789abcdef"
START_TIMEOUT_S = 120
REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Served:
    port: int
    key: str
    model: str
    log: Path | None = None  # what the server printed

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def request(self, method: str, path: str, body=None, headers=None, timeout: float = 60):
        """(status, parsed JSON or text) of one plain HTTP request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        sent.update(headers or {})
        sent = {k: v for k, v in sent.items() if v is not None}
        data = body if isinstance(body, bytes | str) or body is None else json.dumps(body)
        try:
            conn.request(method, path, data, sent)
            response = conn.getresponse()
            raw = response.read().decode()
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def served(starter_model, tmp_path_factory):
    name = starter_model.name.removesuffix(".gguf")
    yield from serving(
        tmp_path_factory, name, [str(starter_model), "--parallel", "4", "--ctx", "512"]
    )


def serving(tmp_path_factory, model: str, args: list[str], env: dict[str, str] | None = None):
    """Start `hearth serve` with `args` (a model path among them, or none to serve the
    Library), with `env` besides the usual, yield it once it answers, and stop it."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HEARTH_API_KEY": API_KEY, **(env or {})}
    command = hearth_command("serve", "--port", str(port), *args)
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    server = Served(port=port, key=API_KEY, model=model, log=log)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"hearth serve exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                if server.request("GET", "/", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"hearth serve did not answer in {START_TIMEOUT_S} s")
            time.sleep(0.3)
        yield server
    finally:
        stop_process(proc)


def hearth_command(*args: str) -> list[str]:
    """The `hearth` console command with `args`, run from this tree."""
    return [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
            *args]  # fmt: skip


def stop_process(proc: subprocess.Popen, grace_s: float = 20) -> None:
    """End `proc` as Ctrl+C would, and kill it if it has not ended within `grace_s`."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def openai_client(served):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=served.base_url, api_key=served.key, timeout=120, max_retries=0)


@pytest.fixture(scope="session")
def anthropic_client(served):
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(
        base_url=f"http://127.0.0.1:{served.port}", api_key=served.key, timeout=120, max_retries=0
    )
