"""Helper machines on one machine, for tests and measurements of llama.cpp's RPC backend:
`hearth host` processes on 127.0.0.1, and a relay that counts what passes between Hearth and one
of them (the traffic per decoded token, which the planner's network model is built on).

    with local_helper(memory_limit_gib=0.06) as helper:     # a `hearth host` process
        helper.address                                       # "127.0.0.1:PORT"
        helper.kill()                                        # as a machine that goes away
    relay = CountingRelay(helper.port); relay.address; relay.snapshot()
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from engine.hardware import rpc_wire

HOST_START_TIMEOUT_S = 60
# Commands that the server answers (ggml-rpc.cpp, rpc_serve_client): each is a round trip.
ANSWERED = {0, 1, 2, 3, 7, 8, 9, 11, 13, 14, 15}
COMMAND_NAMES = {
    0: "ALLOC_BUFFER", 1: "GET_ALIGNMENT", 2: "GET_MAX_SIZE", 3: "BUFFER_GET_BASE",
    4: "FREE_BUFFER", 5: "BUFFER_CLEAR", 6: "SET_TENSOR", 7: "SET_TENSOR_HASH", 8: "GET_TENSOR",
    9: "COPY_TENSOR", 10: "GRAPH_COMPUTE", 11: "GET_DEVICE_MEMORY", 12: "INIT_TENSOR",
    13: "GET_ALLOC_SIZE", 14: "HELLO", 15: "DEVICE_COUNT", 16: "GRAPH_RECOMPUTE",
    17: "MEMSET_TENSOR",
}  # fmt: skip


def free_port_pair() -> int:
    """A port P with P and P + 1 free (`hearth host` uses both)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 65535 and _free(port + 1):
            return port
    raise RuntimeError("no two adjacent free ports on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class LocalHelper:
    process: subprocess.Popen
    port: int
    banner: str

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        """Gone at once, as a machine switched off or unplugged."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@contextlib.contextmanager
def local_helper(
    memory_limit_gib: float | None = None,
    threads: int = 1,
    data_dir: str | None = None,
    devices: tuple[str, ...] = ("CPU",),
    cache: bool = True,
    env: dict[str, str] | None = None,
) -> Iterator[LocalHelper]:
    """A `hearth host` process on 127.0.0.1 (its own port) serving `devices` of this machine."""
    port = free_port_pair()
    command = [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())"]
    command += ["host", "--port", str(port), "--threads", str(threads)]
    for device in devices:
        command += ["--device", device]
    if memory_limit_gib is not None:
        command += ["--memory-limit", str(memory_limit_gib)]
    if not cache:
        command.append("--no-cache")
    env = dict(os.environ if env is None else env)
    if data_dir:
        env["HEARTH_DATA_DIR"] = data_dir
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        banner = _wait_until_serving(process, port)
        yield LocalHelper(process, port, banner)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        if process.stdout:
            process.stdout.close()


def _wait_until_serving(process: subprocess.Popen, port: int) -> str:
    lines = []
    assert process.stdout is not None
    for line in process.stdout:  # the banner comes before the server starts listening
        lines.append(line)
        if line.startswith("On the other machine"):
            break
    deadline = time.monotonic() + HOST_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("hearth host stopped:\n" + "".join(lines))
        try:
            rpc_wire.RpcConnection.open("127.0.0.1", port, timeout_s=1.0).close()
            # drain the helper's output so it never blocks on a full pipe
            threading.Thread(target=_drain, args=(process,), daemon=True).start()
            return "".join(lines)
        except rpc_wire.RpcWireError:
            time.sleep(0.1)
    raise RuntimeError("hearth host did not start listening:\n" + "".join(lines))


def _drain(process: subprocess.Popen) -> None:
    with contextlib.suppress(ValueError, OSError):
        for _ in process.stdout:
            pass


class CountingRelay:
    """Listens on a port of its own and relays one connection at a time to the helper at
    `target_port`, counting bytes each way and the client's commands by kind."""

    def __init__(self, target_port: int):
        self._target = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.sent = 0  # client -> helper
        self.received = 0  # helper -> client
        self.commands: Counter[str] = Counter()
        self.command_bytes: Counter[str] = Counter()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def snapshot(self) -> dict:
        with self._lock:
            answered = sum(
                n for name, n in self.commands.items()
                if name in {COMMAND_NAMES[c] for c in ANSWERED}
            )  # fmt: skip
            return {
                "sent": self.sent,
                "received": self.received,
                "answered": answered,
                "commands": dict(self.commands),
                "command_bytes": dict(self.command_bytes),
            }

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._upstream, args=(client, server), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while True:
                head = _exactly(client, 9)
                command, size = struct.unpack("<BQ", head)
                payload = _exactly(client, size)
                server.sendall(head + payload)
                name = COMMAND_NAMES.get(command, str(command))
                with self._lock:
                    self.sent += 9 + size
                    self.commands[name] += 1
                    self.command_bytes[name] += 9 + size
        except OSError:
            _close(client, server)

    def _downstream(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while True:
                data = server.recv(1 << 16)
                if not data:
                    break
                client.sendall(data)
                with self._lock:
                    self.received += len(data)
        except OSError:
            pass
        _close(client, server)


def _exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = sock.recv(min(left, 1 << 20))
        if not part:
            raise OSError("closed")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()
