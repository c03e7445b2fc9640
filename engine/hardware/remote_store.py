"""The helper machines this person added (the Hardware page, `hearth hw --host ADDR --remember`),
kept as a list of addresses in helpers.json in Hearth's data folder; and how they read.

    load_helpers() -> list[str]         save_helpers([...])
    helper_lines(host) -> list[str]     the lines `hearth hw` and the Hardware page show

Only addresses are kept: what a helper offers (its free memory, the link) changes, so it is
asked again each time (engine/hardware/remote.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.hardware.remote import RemoteHost
from engine.paths import data_dir
from engine.units import format_bytes

FILE_NAME = "helpers.json"


def _path() -> Path:
    return data_dir() / FILE_NAME


def load_helpers() -> list[str]:
    """The remembered addresses; a missing or unreadable file is no helpers."""
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    helpers = data.get("helpers") if isinstance(data, dict) else None
    return [str(a) for a in helpers if isinstance(a, str)] if isinstance(helpers, list) else []


def save_helpers(addresses: list[str]) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    unique = list(dict.fromkeys(a.strip() for a in addresses if a.strip()))
    temporary.write_text(json.dumps({"helpers": unique}, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)  # whole or not at all


def link_phrase(host: RemoteHost) -> str:
    if host.link is None:
        return "link not measured"
    mbps = host.link.bytes_per_s * 8 / 1e6
    speed = f"{mbps / 1000:.2f} Gbit/s" if mbps >= 1000 else f"{mbps:.0f} Mbit/s"
    return f"link {speed}, {host.link.latency_s * 1e3:.2f} ms round trip"


def device_phrase(host: RemoteHost, index: int) -> str:
    device = host.devices[index]
    text = f"{format_bytes(device.free_bytes)} free of {format_bytes(device.total_bytes)}"
    if device.memory_limit_bytes is not None:
        text += f", lent up to {format_bytes(device.memory_limit_bytes)}"
    return text


def helper_lines(host: RemoteHost) -> list[str]:
    """A heading line for the helper, then one line per device."""
    lines = [f"{host.address} (RPC protocol {'.'.join(map(str, host.protocol_version))}, "
             f"{link_phrase(host)})"]  # fmt: skip
    for index, device in enumerate(host.devices):
        lines.append(f"  {device.name} [{device.backend}]: {device_phrase(host, index)}")
    return lines
