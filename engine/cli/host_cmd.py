"""`hearth host`: lend this machine's GPU (or CPU) to Hearth on another computer.

Starts llama.cpp's RPC server (ggml-rpc, inside the engine Hearth installed) for the chosen
devices, with its local tensor cache (a reload sends only the hashes of weights the helper has
already seen), prints the address to give the other machine (`hearth hw --host ADDR`, or the
Hardware page's "Add helper"), and serves until Ctrl-C.

The RPC protocol has no authentication and no encryption: anyone who can reach the port can
run code on the served device and read what passes. So it listens on 127.0.0.1 unless
`--listen ADDR` says otherwise; across machines, use an SSH tunnel or WireGuard
(docs/multi-machine.md).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
import threading

from engine.cli import hearth_version, numbers
from engine.hardware import remote_about
from engine.hardware.remote import DEFAULT_PORT
from engine.hardware.rpc_wire import PROTOCOL_VERSION, version_text
from engine.paths import data_dir

LOOPBACK = "127.0.0.1"
NO_AUTH_WARNING = (
    "WARNING: llama.cpp's RPC protocol has no authentication or encryption. Anyone who can "
    "reach {where} can use this machine's devices and read what passes. Listen on a private "
    "network only (WireGuard), or keep the default 127.0.0.1 and use an SSH tunnel "
    "(docs/multi-machine.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        metavar="ADDR",
        default=LOOPBACK,
        help="the address to listen on (default 127.0.0.1: this machine only); any other "
        "address lets other machines in, without authentication",
    )
    parser.add_argument(
        "--port",
        type=numbers.int_in_range(1, 65534),
        default=DEFAULT_PORT,
        help=f"default {DEFAULT_PORT}; +1 is used too",
    )
    parser.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="NAME",
        help="a device to serve, as llama.cpp names it (CUDA0, Vulkan1, Metal, CPU); repeat "
        "for several (default: every GPU, else the CPU)",
    )
    parser.add_argument(
        "--memory-limit",
        metavar="GIB",
        type=numbers.memory_gib,
        help="the most memory (GiB) other machines should plan to use on each served device",
    )
    parser.add_argument(
        "--threads",
        type=numbers.threads,
        default=0,
        help="CPU threads for a served CPU (default: half)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not keep received weights on disk"
    )


def run(args: argparse.Namespace) -> int:
    try:
        listen = _listen_address(args.listen)
    except ValueError as exc:
        print(f"hearth host: {exc}", file=sys.stderr)
        return 2
    from engine.llama import rpc

    try:
        if not rpc.rpc_available():
            raise rpc.RpcUnavailable(
                "This Hearth's engine was built without llama.cpp's RPC backend. Run the "
                "installer again (it builds the engine with -DGGML_RPC=ON), then retry."
            )
        served = rpc.serving_devices(args.device)
    except (rpc.RpcUnavailable, ValueError) as exc:
        print(f"hearth host: {exc}", file=sys.stderr)
        return 1
    if not served:
        print("hearth host: llama.cpp lists no device on this machine to serve.", file=sys.stderr)
        return 1
    limit = int(args.memory_limit * 1024**3) if args.memory_limit else None
    cache_dir = None if args.no_cache else str(_cache_dir())
    threads = args.threads or max(1, (os.cpu_count() or 2) // 2)
    where = f"{listen}:{args.port}"
    bandwidths = _bandwidths([facts for _, facts in served])
    about = {
        "hearth": hearth_version(),
        "rpc_protocol": version_text(PROTOCOL_VERSION),
        "llama_cpp_python": rpc.engine_version(),
        "devices": [
            {
                "name": facts.name,
                "description": facts.description,
                "backend": facts.backend.lower(),
                "memory_limit_bytes": limit,
                "memory_bandwidth_gbps": bandwidths.get(facts.name),
            }
            for _, facts in served
        ],
    }
    try:
        about_socket = remote_about.serve_about(listen, remote_about.about_port(args.port), about)
    except OSError as exc:
        print(
            f"hearth host: cannot listen on {listen} port {remote_about.about_port(args.port)} "
            f"({exc.strerror or exc}). Choose another --port (it uses PORT and PORT+1).",
            file=sys.stderr,
        )
        return 1
    if listen != LOOPBACK:
        print(NO_AUTH_WARNING.format(where=where), file=sys.stderr)
    print(f"Hearth helper at {where} (llama.cpp RPC protocol {about['rpc_protocol']})")
    for _, facts in served:
        cap = f", planned up to {limit / 1024**3:.1f} GiB" if limit else ""
        print(
            f"  {facts.name}: {facts.description}, {facts.free_bytes / 1024**3:.1f} GiB free "
            f"of {facts.total_bytes / 1024**3:.1f} GiB{cap}"
        )
    print(f"  tensor cache: {cache_dir or 'off'}")
    reach = f"{_address_for_others()}:{args.port}" if listen == "0.0.0.0" else where
    print(f"On the other machine: hearth hw --host {reach}   (Ctrl-C here stops the helper)")
    sys.stdout.flush()
    handles = [handle for handle, _ in served]
    # The server blocks in C for good; on a thread of its own, Ctrl-C still reaches Python.
    server = threading.Thread(
        target=rpc.start_server,
        args=(where, cache_dir, threads, handles),
        name="hearth-rpc-server",
        daemon=True,
    )
    server.start()
    try:
        while server.is_alive():
            server.join(0.5)
    except KeyboardInterrupt:
        print("hearth host: stopped.")
        return 0
    finally:
        remote_about.stop_about(about_socket)
    print(
        f"hearth host: llama.cpp's RPC server stopped (its reason is above); is port "
        f"{args.port} already in use? Choose another with --port.",
        file=sys.stderr,
    )
    return 1


def _listen_address(text: str) -> str:
    """The address to bind, checked: an IPv4 address (a name would hide which network it is;
    llama.cpp's RPC server splits its endpoint at the first ':', so IPv6 cannot be given)."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        address = None
    if address is None or address.version != 4:
        raise ValueError(
            f"--listen takes an IPv4 address of this machine (127.0.0.1, 192.168.1.20, "
            f"10.0.0.2 on WireGuard, 0.0.0.0 for all), not '{text}'"
        )
    return str(address)


def _bandwidths(served) -> dict[str, float]:
    """Memory bandwidth per served device, from this machine's detection (GPUs by PCI address,
    the CPU by kind), for the planner's speed estimate on the other machine."""
    from engine.hardware import detect

    devices = detect().devices
    by_bus = {d.pci_bus_id: d for d in devices if d.pci_bus_id}
    cpu = next((d for d in devices if not d.is_gpu), None)
    found = {}
    for facts in served:
        device = cpu if facts.type in ("cpu", "accel") else by_bus.get(facts.pci_bus_id or "")
        if device is not None and device.memory_bandwidth_gbps:
            found[facts.name] = device.memory_bandwidth_gbps
    return found


def _address_for_others() -> str:
    """This machine's address on its default route (for 0.0.0.0, which others cannot dial).
    A UDP "connect" only picks the route; nothing is sent."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
    except OSError:
        return "THIS-MACHINE"


def _cache_dir():
    folder = data_dir() / "rpc-cache"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
