"""A small client of llama.cpp's RPC protocol (ggml-rpc), in Python, for looking at a helper
machine before llama.cpp connects to it.

Why not ask llama.cpp: its RPC client aborts the whole process when a server is unreachable,
speaks another protocol version or drops the connection (GGML_ABORT in ggml-rpc.cpp), so the
checks that must end in a message instead of a crash (is the helper there, which version, how
much memory, how fast is the link) are made here, over a plain socket, with timeouts.

The wire format, from ggml/src/ggml-rpc/ggml-rpc.cpp of llama-cpp-python 0.3.36 (protocol 7.0.0):

    request:  | command (1 byte) | size (uint64) | payload (size bytes) |
    response: | size (uint64) | payload |            (only for commands that answer)

Payloads are packed little-endian structs. The first command of a connection is HELLO; the
server answers with its protocol version (major, minor, patch). Versions 7.x send a 24-byte
capability block with HELLO; servers before 4.0 took an empty HELLO and answered 3 bytes, which
is how an old helper's version is still named when it is refused.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

PROTOCOL_VERSION = (7, 0, 0)  # RPC_PROTO_*_VERSION in ggml-rpc.h of the engine Hearth builds

# enum rpc_cmd
ALLOC_BUFFER = 0
GET_ALIGNMENT = 1
BUFFER_GET_BASE = 3
FREE_BUFFER = 4
SET_TENSOR = 6
GET_DEVICE_MEMORY = 11
HELLO = 14
DEVICE_COUNT = 15

CONN_CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE (transport.h); zeros: plain TCP, no RDMA upgrade
GGML_TYPE_F32 = 0
# struct rpc_tensor (packed): id, type, buffer, ne[4], nb[4], op, op_params[16], flags,
# src[10], view_src, view_offs, data, name[64], use_count
RPC_TENSOR = struct.Struct("<QIQ4I4II16ii10QQQQ64si")
assert RPC_TENSOR.size == 296


class RpcWireError(Exception):
    """The helper did not answer as an RPC server of this protocol would; the message says how."""


class RpcNoAnswer(RpcWireError):
    """Connected, but no answer in time: the server serves one client at a time, so another
    client (a Hearth engine with a model on it) may be holding it."""


def compatible(server: tuple[int, int, int], client: tuple[int, int, int]) -> bool:
    """llama.cpp's own rule (negotiate_hello): the same major version, a minor no newer."""
    return server[0] == client[0] and server[1] <= client[1]


def version_text(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


@dataclass
class RpcConnection:
    """One connection to an RPC server. The server serves one client at a time, so this is
    closed as soon as its questions are answered (llama.cpp connects after it)."""

    sock: socket.socket
    server_version: tuple[int, int, int]

    @classmethod
    def open(cls, host: str, port: int, timeout_s: float = 5.0) -> RpcConnection:
        sock = _connect(host, port, timeout_s)
        try:
            _send(sock, HELLO, bytes(CONN_CAPS_SIZE))
            reply = _receive(sock, 4 + CONN_CAPS_SIZE)
        except RpcNoAnswer:
            sock.close()
            raise
        except RpcWireError:
            sock.close()
            # A server of protocol 3.x or older closes on a HELLO with a payload; ask as it did.
            return cls(*_legacy_hello(host, port, timeout_s))
        except BaseException:
            sock.close()
            raise
        return cls(sock, (reply[0], reply[1], reply[2]))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RpcConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- questions ------------------------------------------------------------------------------

    def device_count(self) -> int:
        _send(self.sock, DEVICE_COUNT, b"")
        return struct.unpack("<I", _receive(self.sock, 4))[0]

    def device_memory(self, device: int) -> tuple[int, int]:
        """(free, total) bytes, as the server's backend reports them."""
        _send(self.sock, GET_DEVICE_MEMORY, struct.pack("<I", device))
        return struct.unpack("<QQ", _receive(self.sock, 16))

    def alignment(self, device: int) -> int:
        _send(self.sock, GET_ALIGNMENT, struct.pack("<I", device))
        return struct.unpack("<Q", _receive(self.sock, 8))[0]

    def round_trip_s(self, device: int = 0) -> float:
        """Seconds for one question and its answer (GET_ALIGNMENT: the cheapest command)."""
        began = time.perf_counter()
        self.alignment(device)
        return time.perf_counter() - began

    def upload_rate(self, device: int, chunk_bytes: int, chunks: int) -> float:
        """Bytes per second of tensor data sent to the server: a scratch buffer on `device`,
        `chunks` SET_TENSOR writes of `chunk_bytes`, then one answered question so the time
        covers their arrival; the buffer is freed."""
        _send(self.sock, ALLOC_BUFFER, struct.pack("<IQ", device, chunk_bytes))
        remote, size = struct.unpack("<QQ", _receive(self.sock, 16))
        if remote == 0 or size < chunk_bytes:
            raise RpcWireError(f"the helper could not allocate {chunk_bytes} bytes for a link test")
        try:
            _send(self.sock, BUFFER_GET_BASE, struct.pack("<Q", remote))
            base = struct.unpack("<Q", _receive(self.sock, 8))[0]
            header = _tensor(remote, base, chunk_bytes) + struct.pack("<BQ", 0, 0)
            payload = header + bytes(chunk_bytes)
            began = time.perf_counter()
            for _ in range(chunks):
                _send(self.sock, SET_TENSOR, payload)
            self.alignment(device)
            elapsed = time.perf_counter() - began
        finally:
            _send(self.sock, FREE_BUFFER, struct.pack("<Q", remote))
        return chunk_bytes * chunks / max(elapsed, 1e-9)


def _tensor(buffer: int, data: int, nbytes: int) -> bytes:
    n = nbytes // 4
    name = b"hearth-link-test".ljust(64, b"\0")
    return RPC_TENSOR.pack(
        0, GGML_TYPE_F32, buffer, n, 1, 1, 1, 4, nbytes, nbytes, nbytes, 0,
        *([0] * 16), 0, *([0] * 10), 0, 0, data, name, 0,
    )  # fmt: skip


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except TimeoutError:
        raise RpcWireError(f"no answer from {host}:{port} within {timeout_s:g} s") from None
    except OSError as exc:
        raise RpcWireError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _legacy_hello(host: str, port: int, timeout_s: float):
    sock = _connect(host, port, timeout_s)
    try:
        _send(sock, HELLO, b"")
        reply = _receive(sock, 3)
    except RpcWireError:
        sock.close()
        raise RpcWireError(
            f"{host}:{port} does not answer as a llama.cpp RPC server (no HELLO reply)"
        ) from None
    return sock, (reply[0], reply[1], reply[2])


def _send(sock: socket.socket, command: int, payload: bytes) -> None:
    try:
        sock.sendall(struct.pack("<BQ", command, len(payload)) + payload)
    except OSError as exc:
        raise RpcWireError(f"the connection broke while sending: {exc.strerror or exc}") from None


def _receive(sock: socket.socket, size: int) -> bytes:
    header = _read_exactly(sock, 8)
    (announced,) = struct.unpack("<Q", header)
    if announced != size:
        raise RpcWireError(f"the helper answered {announced} bytes where {size} were expected")
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        try:
            part = sock.recv(left)
        except TimeoutError:
            raise RpcNoAnswer("the helper stopped answering") from None
        except OSError as exc:
            raise RpcWireError(f"the connection broke: {exc.strerror or exc}") from None
        if not part:
            raise RpcWireError("the helper closed the connection")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
