"""Read macOS `sysctl` values: one process for many names, unknown names skipped."""

from __future__ import annotations

from engine.hardware.host import Deadline, Host

SYSCTL_TIMEOUT_S = 2.0


def read_sysctl(host: Host, deadline: Deadline, names: list[str]) -> tuple[dict[str, str], str]:
    """({name: value}, problem). sysctl prints the names it knows and exits non-zero when any
    name is unknown (older macOS lacks some), so the output is read whatever the status."""
    output = host.run(["sysctl", *names], deadline.left(SYSCTL_TIMEOUT_S))
    if output.returncode is None:
        return {}, output.problem
    return parse_sysctl(output.stdout), ""


def parse_sysctl(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name and " " not in name.strip():
            values[name.strip()] = value.strip()
    return values


def as_int(values: dict[str, str], name: str) -> int | None:
    try:
        return int(values[name])
    except (KeyError, ValueError):
        return None
