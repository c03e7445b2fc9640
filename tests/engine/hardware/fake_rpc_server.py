"""A stand-in for llama.cpp's RPC server, speaking the wire format of ggml-rpc.cpp (as
engine/hardware/rpc_wire.py documents it), to test the client against versions and failures
no real server of this build can show: an older protocol, a pre-4.0 HELLO, a server that hangs
up. The real server is tested in tests/engine/llama/test_rpc_split.py."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field

from engine.hardware import rpc_wire


@dataclass
class FakeRpcServer:
    version: tuple[int, int, int] = rpc_wire.PROTOCOL_VERSION
    devices: list[tuple[int, int]] = field(default_factory=lambda: [(3 << 30, 4 << 30)])
    legacy_hello: bool = False  # protocol < 4: HELLO without payload, 3-byte answer
    hang_up_after_hello: bool = False
    silent: bool = False  # accepts, never answers (busy with another client)
    received_tensor_bytes: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        # shutdown first: on Linux, close() alone leaves a thread blocked in accept() accepting
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with client, contextlib.suppress(OSError, struct.error):  # the client left
                self._session(client)

    def _session(self, sock: socket.socket) -> None:
        if self.silent:
            while sock.recv(1 << 16):  # holds the connection until the client gives up
                pass
            return
        command, payload = _read_command(sock)
        if command != rpc_wire.HELLO:
            return
        if self.legacy_hello:
            if payload:
                return  # an old server closes on the new HELLO
            _answer(sock, bytes(self.version))
        else:
            if len(payload) != rpc_wire.CONN_CAPS_SIZE:
                return
            _answer(sock, bytes(self.version) + bytes(1 + rpc_wire.CONN_CAPS_SIZE))
        if self.hang_up_after_hello:
            return
        buffers: dict[int, int] = {}
        while True:
            command, payload = _read_command(sock)
            if command == rpc_wire.DEVICE_COUNT:
                _answer(sock, struct.pack("<I", len(self.devices)))
            elif command == rpc_wire.GET_DEVICE_MEMORY:
                (device,) = struct.unpack("<I", payload)
                _answer(sock, struct.pack("<QQ", *self.devices[device]))
            elif command == rpc_wire.GET_ALIGNMENT:
                _answer(sock, struct.pack("<Q", 32))
            elif command == rpc_wire.ALLOC_BUFFER:
                _, size = struct.unpack("<IQ", payload)
                remote = 0x1000 + len(buffers)
                buffers[remote] = size
                _answer(sock, struct.pack("<QQ", remote, size))
            elif command == rpc_wire.BUFFER_GET_BASE:
                _answer(sock, struct.pack("<Q", 0x7F0000000000))
            elif command == rpc_wire.SET_TENSOR:
                self.received_tensor_bytes += len(payload) - rpc_wire.RPC_TENSOR.size - 9
            elif command == rpc_wire.FREE_BUFFER:
                buffers.pop(struct.unpack("<Q", payload)[0], None)
            else:
                return


def _read_command(sock: socket.socket) -> tuple[int, bytes]:
    head = _exactly(sock, 9)
    command, size = struct.unpack("<BQ", head)
    return command, _exactly(sock, size)


def _answer(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack("<Q", len(payload)) + payload)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            raise OSError("closed")
        data += part
    return data
