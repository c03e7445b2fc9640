"""Connection hygiene against the real uvicorn server (on a thread, with a stand-in engine):
slow clients are cut off and cannot starve the others (finding 4), and a console that went
away never fails a request (finding 7)."""

import asyncio
import http.client
import logging
import os
import socket
import time

import pytest

from engine.runtime import protocol as p
from engine.server.config import Limits, ServerConfig
from engine.server.console import Console
from engine.server.runner import ServerThread
from engine.server.server_state import ServerState
from tests.engine.server.conftest import free_port
from tests.engine.server.stand_in import StandInLink


@pytest.fixture
def server():
    limits = Limits(header_seconds=0.3, body_seconds=0.3)
    config = ServerConfig(port=free_port(), limits=limits)
    thread = ServerThread(ServerState(link=StandInLink(), config=config))
    thread.start()
    yield config
    thread.stop()


def _get(port: int, path: str = "/api/version") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_connection_that_never_finishes_its_headers_is_closed(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert _closed_within(sock, 3)


def test_many_slow_connections_do_not_starve_a_normal_client(server):
    slow = []
    try:
        for _ in range(150):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(sock)
        started = time.monotonic()
        assert _get(server.port) == 200
        assert time.monotonic() - started < 2
    finally:
        for sock in slow:
            sock.close()


def test_a_body_that_trickles_is_answered_408(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")  # fmt: skip
        sock.settimeout(3)
        assert sock.recv(4096).startswith(b"HTTP/1.1 408")


def test_a_console_that_went_away_drops_lines_instead_of_raising():
    read_end, write_end = os.pipe()
    os.close(read_end)  # `hearth serve | head -1` after head has exited
    with os.fdopen(write_end, "w") as stream:
        console = Console(stream)
        console.line("first")  # BrokenPipeError inside: dropped
        console.line("second")
        assert console.closed


class _HangingLink(StandInLink):
    async def generate(self, request):
        yield p.TokenText(request_id=1, text="a")
        await asyncio.Event().wait()  # a generation that never ends by itself


def test_stopping_the_server_ends_running_requests_quickly_and_quietly(caplog):
    config = ServerConfig(port=free_port(), limits=Limits(shutdown_seconds=0.2))
    thread = ServerThread(ServerState(link=_HangingLink(), config=config))
    thread.start()
    sock = socket.create_connection(("127.0.0.1", config.port), timeout=5)
    body = b'{"messages": [{"role": "user", "content": "Hi"}], "stream": true}'
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    sock.sendall(head + body)
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")  # streaming, and it never ends
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        thread.stop()
    sock.close()
    assert time.monotonic() - started < 3 and not thread.running
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]
