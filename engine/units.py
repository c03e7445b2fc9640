"""Byte counts for people, written once.

format_bytes(3 * 2**30)                 -> "3.0 GiB"
format_bytes(700 * 2**20)               -> "700 MiB"    (whole KiB and MiB: small parts)
format_bytes(4_300_000_000, 2, "GiB")   -> "4.00 GiB"   (a fixed unit, for sums that must add up)
format_bytes(None)                      -> "?"
"""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(n: int | float | None, precision: int = 1, unit: str | None = None) -> str:
    """`n` bytes in binary units: the largest unit under which `n` is at least 1, or `unit`."""
    if n is None:
        return "?"
    if unit is not None:
        return f"{n / 1024 ** _UNITS.index(unit):.{precision}f} {unit}"
    value = float(n)
    for name in _UNITS:
        if abs(value) < 1024 or name == _UNITS[-1]:
            digits = precision if name in ("GiB", "TiB") else 0
            return f"{value:.{digits}f} {name}"
        value /= 1024
    raise AssertionError("unreachable")
