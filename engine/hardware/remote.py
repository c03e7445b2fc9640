"""Helper machines: another computer's devices, served by llama.cpp's RPC backend (`hearth host`
there), looked at from here: what devices, how much memory, how fast and how far the link is.

    probe_remote("192.168.1.20:50052") -> RemoteHost          raises RemoteHostError
    parse_address("pc2") -> ("pc2", 50052)

A helper of an incompatible llama.cpp RPC protocol is refused here, with both versions named,
before llama.cpp's own client would meet it (and abort the engine, as it does on any mismatch).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from engine.hardware import remote_about, rpc_wire

DEFAULT_PORT = 50052  # llama.cpp's rpc-server default
# The link test: 4 x 4 MiB of tensor data (a third of a second on 1 GbE) and 10 round trips.
LINK_CHUNK_BYTES = 4 * 1024 * 1024
LINK_CHUNKS = 4
LINK_PINGS = 10
BACKEND_NAMES = {"cuda": "cuda", "rocm": "rocm", "hip": "rocm", "metal": "metal", "mtl": "metal"}
BACKEND_NAMES |= {"vulkan": "vulkan", "cpu": "cpu", "blas": "cpu"}


class RemoteHostError(Exception):
    """A helper that cannot be used; the message says what happened and what to do."""


class HelperBusy(RemoteHostError):
    """The helper accepted the connection but does not answer: it serves one client at a time,
    and another (this app's engine, with a model on it) may be holding it."""


@dataclass(frozen=True)
class RemoteDevice:
    address: str  # "host:port" of the helper
    index: int  # the device's number on that helper (llama.cpp's RPC device order)
    name: str  # "CUDA0" (from `hearth host`), else "RPC device 0"
    description: str
    backend: str  # "cuda", "rocm", "metal", "vulkan", "cpu", or "unknown"
    free_bytes: int
    total_bytes: int
    memory_limit_bytes: int | None = None  # `hearth host --memory-limit`: the most to plan for
    memory_bandwidth_gbps: float | None = None  # as the helper's own detection found it

    @property
    def usable_bytes(self) -> int:
        """Free memory, capped by the helper's own limit."""
        if self.memory_limit_bytes is None:
            return self.free_bytes
        return min(self.free_bytes, self.memory_limit_bytes)


@dataclass(frozen=True)
class RemoteLink:
    latency_s: float  # one question and its answer (median)
    bytes_per_s: float  # tensor data towards the helper

    def __str__(self) -> str:
        return f"{self.bytes_per_s * 8 / 1e9:.2f} Gbit/s, {self.latency_s * 1e3:.2f} ms round trip"


@dataclass(frozen=True)
class RemoteHost:
    address: str
    protocol_version: tuple[int, int, int]
    devices: tuple[RemoteDevice, ...]
    link: RemoteLink | None = None
    llama_cpp_version: str = ""  # the helper's llama-cpp-python, when `hearth host` says it
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RemoteHost:
        link = data.get("link")
        return cls(
            address=data["address"],
            protocol_version=tuple(data["protocol_version"]),
            devices=tuple(RemoteDevice(**d) for d in data.get("devices", ())),
            link=RemoteLink(**link) if link else None,
            llama_cpp_version=data.get("llama_cpp_version", ""),
            notes=tuple(data.get("notes", ())),
        )


def parse_address(text: str) -> tuple[str, int]:
    """ "host", "host:port", "[v6]:port" -> (host, port); raises RemoteHostError."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise RemoteHostError(f"'{text}' is not a helper address; write HOST or HOST:PORT.")
    try:
        port = int(port_text) if port_text else DEFAULT_PORT
    except ValueError:
        raise RemoteHostError(f"'{text}': the port must be a number.") from None
    if not 0 < port < 65536:
        raise RemoteHostError(f"'{text}': the port must be between 1 and 65535.")
    return host, port


def endpoint(host: str, port: int) -> str:
    """The address as llama.cpp's RPC client parses it (host:port, no brackets)."""
    return f"{host}:{port}"


def probe_remote(address: str, *, measure_link: bool = True, timeout_s: float = 5.0) -> RemoteHost:
    """Connect to a helper, check its protocol version, list its devices and (optionally)
    measure the link. Raises RemoteHostError with what to do."""
    host, port = parse_address(address)
    where = endpoint(host, port)
    try:
        connection = rpc_wire.RpcConnection.open(host, port, timeout_s)
    except rpc_wire.RpcNoAnswer:
        raise HelperBusy(
            f"The helper at {where} accepted the connection but did not answer within "
            f"{timeout_s:g} s. It serves one connection at a time: a model loaded on it (here or "
            "on another machine) holds it. Unload that model, or check `hearth host` there."
        ) from None
    except rpc_wire.RpcWireError as exc:
        raise RemoteHostError(
            f"The helper at {where} cannot be reached: {exc}. Start `hearth host` there (with "
            "--listen to accept this machine), check the address, and any tunnel or firewall."
        ) from None
    with connection:
        theirs, ours = connection.server_version, rpc_wire.PROTOCOL_VERSION
        if not rpc_wire.compatible(theirs, ours):
            raise RemoteHostError(
                f"The helper at {where} runs llama.cpp RPC protocol "
                f"{rpc_wire.version_text(theirs)}; this Hearth's engine speaks "
                f"{rpc_wire.version_text(ours)}. Install the same Hearth version on both "
                "machines."
            )
        try:
            count = connection.device_count()
            memory = [connection.device_memory(i) for i in range(count)]
            link = _measure(connection) if measure_link and count else None
        except rpc_wire.RpcWireError as exc:
            raise RemoteHostError(
                f"The helper at {where} stopped answering ({exc}). Check that `hearth host` is "
                "still running there."
            ) from None
    about = remote_about.read_about(host, remote_about.about_port(port), timeout_s=2.0) or {}
    described = about.get("devices") or []
    devices = []
    for index, (free, total) in enumerate(memory):
        facts = described[index] if index < len(described) else {}
        devices.append(
            RemoteDevice(
                address=where,
                index=index,
                name=str(facts.get("name") or f"RPC device {index}"),
                description=str(facts.get("description") or f"device {index} of {where}"),
                backend=BACKEND_NAMES.get(str(facts.get("backend", "")).lower(), "unknown"),
                free_bytes=int(free),
                total_bytes=int(total),
                memory_limit_bytes=facts.get("memory_limit_bytes"),
                memory_bandwidth_gbps=facts.get("memory_bandwidth_gbps"),
            )
        )
    notes = ()
    if not about:
        notes = (
            f"{where} is a plain llama.cpp rpc-server (not `hearth host`): its devices' kind is "
            "unknown, so their memory is planned as for a CUDA card (the most cautious).",
        )
    return RemoteHost(
        address=where,
        protocol_version=theirs,
        devices=tuple(devices),
        link=link,
        llama_cpp_version=str(about.get("llama_cpp_python", "")),
        notes=notes,
    )


def _measure(connection: rpc_wire.RpcConnection) -> RemoteLink:
    connection.round_trip_s()  # the first answer may include the server's warm-up
    pings = [connection.round_trip_s() for _ in range(LINK_PINGS)]
    rate = connection.upload_rate(0, LINK_CHUNK_BYTES, LINK_CHUNKS)
    return RemoteLink(latency_s=statistics.median(pings), bytes_per_s=rate)
