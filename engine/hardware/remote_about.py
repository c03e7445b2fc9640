"""What a `hearth host` helper says about itself, beside llama.cpp's RPC port.

llama.cpp's RPC protocol tells a client how many devices a server has and their memory, not what
they are; the planner needs the backend (CUDA, Metal, CPU...) to model a device's memory as it
would a local one. So `hearth host` also answers on the next port (RPC port + 1) with one line
of JSON, then closes:

    {"hearth_about": 1, "rpc_protocol": "7.0.0", "llama_cpp_python": "0.3.36",
     "devices": [{"name": "CUDA0", "description": "NVIDIA GeForce RTX 4090",
                  "backend": "cuda", "memory_limit_bytes": null}]}

It only ever sends that line and reads nothing, so it adds nothing to what the RPC port already
exposes. A plain llama.cpp `rpc-server` has no such port; its devices are then of unknown backend
and planned with the most conservative profile (see engine/planner/remote.py).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any

ABOUT_VERSION = 1
MAX_ABOUT_BYTES = 64 * 1024


def about_port(rpc_port: int) -> int:
    return rpc_port + 1


def serve_about(host: str, port: int, about: dict[str, Any]) -> socket.socket:
    """Answer every connection on (host, port) with `about` as one JSON line, on a daemon
    thread; returns the listening socket (stop_about(socket) stops it)."""
    line = (json.dumps({"hearth_about": ABOUT_VERSION, **about}) + "\n").encode()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(8)

    def answer() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:  # closed: the host is stopping
                return
            # suppress: the asker left early, nothing to do
            with client, contextlib.suppress(OSError):
                client.sendall(line)

    threading.Thread(target=answer, name="hearth-host-about", daemon=True).start()
    return server


def stop_about(server: socket.socket) -> None:
    # shutdown first: on Linux, close() alone leaves the thread blocked in accept() accepting
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)
    server.close()


def read_about(host: str, port: int, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The helper's description, or None where nothing answers as `hearth host` does."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            data = b""
            while b"\n" not in data and len(data) < MAX_ABOUT_BYTES:
                part = sock.recv(4096)
                if not part:
                    break
                data += part
    except OSError:
        return None
    try:
        about = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return None
    if not isinstance(about, dict) or about.get("hearth_about") != ABOUT_VERSION:
        return None
    return about
