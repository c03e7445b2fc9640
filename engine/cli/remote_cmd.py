"""Helper machines on the command line: `hearth hw --host ADDR` (and the planner's commands)
probe each helper once, print it beside the local devices, and may remember it."""

from __future__ import annotations

from typing import Any, TextIO

from engine.hardware.remote import RemoteHost, RemoteHostError, probe_remote
from engine.hardware.remote_store import helper_lines, load_helpers, save_helpers
from engine.untrusted_text import printable_line

# (address as given, the helper or the message saying why it cannot be used)
Probed = tuple[str, RemoteHost | str]


def probe_helpers(addresses: list[str]) -> list[Probed]:
    out: list[Probed] = []
    for address in addresses:
        try:
            out.append((address, probe_remote(address)))
        except RemoteHostError as exc:
            out.append((address, str(exc)))
    return out


def reachable(probed: list[Probed]) -> list[RemoteHost]:
    return [found for _, found in probed if isinstance(found, RemoteHost)]


def print_helpers(probed: list[Probed], out: TextIO) -> None:
    if not probed:
        return
    out.write("\nHelper machines (llama.cpp RPC)\n")
    for address, found in probed:  # what was typed, and what a helper said: escaped
        if isinstance(found, str):
            out.write(f"  {printable_line(address)}: {printable_line(found)}\n")
            continue
        for line in helper_lines(found):
            out.write(f"  {printable_line(line)}\n")
        for note in found.notes:
            out.write(f"  note: {printable_line(note)}\n")


def helpers_json(probed: list[Probed]) -> list[dict[str, Any]]:
    return [
        {"address": address, "error": found}
        if isinstance(found, str)
        else {"address": address, **found.to_dict()}
        for address, found in probed
    ]


def remember(addresses: list[str]) -> None:
    save_helpers(load_helpers() + addresses)
