"""Memory bandwidth: from the memory clock and bus width when the driver reports them, else a
table of known parts.

Decode speed on a GPU is bound by how fast the weights stream from memory, so the planner uses
this figure to estimate tokens per second. NVML reports the memory clock so that

    bytes per second = clock (MHz) * 1e6 * 2 (double data rate) * bus width (bits) / 8

which gives the published figures for GDDR6/6X and HBM parts alike (RTX 4090: 10501 MHz, 384 bit
-> 1008 GB/s; H100 SXM: 2619 MHz, 5120 bit -> 3352 GB/s). Other drivers report clocks whose
relation to the data rate depends on the memory type, so for them the table is used.

The table holds published specifications (GB/s = 10^9 bytes per second). Names are matched after
normalisation; the longest key contained in a device's name wins, so "rtx 4090 laptop" beats
"rtx 4090".
"""

from __future__ import annotations

import re

# fmt: off
KNOWN_BANDWIDTH_GBPS: dict[str, float] = {
    # NVIDIA GeForce
    "rtx 5090": 1792, "rtx 5080": 960, "rtx 5070 ti": 896, "rtx 5070": 672,
    "rtx 5060 ti": 448, "rtx 5060": 448,
    "rtx 4090": 1008, "rtx 4090 laptop": 576, "rtx 4080 super": 736, "rtx 4080": 717,
    "rtx 4080 laptop": 432, "rtx 4070 ti super": 672, "rtx 4070 ti": 504, "rtx 4070 super": 504,
    "rtx 4070": 504, "rtx 4070 laptop": 256, "rtx 4060 ti": 288, "rtx 4060": 272,
    "rtx 4060 laptop": 256,
    "rtx 3090 ti": 1008, "rtx 3090": 936, "rtx 3080 ti": 912, "rtx 3080": 760, "rtx 3070 ti": 608,
    "rtx 3070": 448, "rtx 3060 ti": 448, "rtx 3060": 360,
    "rtx 2080 ti": 616, "rtx 2080 super": 496, "rtx 2080": 448, "rtx 2070 super": 448,
    "rtx 2070": 448, "rtx 2060 super": 448, "rtx 2060": 336,
    "gtx 1080 ti": 484, "gtx 1080": 320, "gtx 1070": 256, "gtx 1660 super": 336,
    "gtx 1660 ti": 288, "titan rtx": 672, "titan v": 652,
    # NVIDIA workstation and data centre
    "rtx 6000 ada": 960, "rtx a6000": 768, "rtx a5000": 768, "rtx a4000": 448,
    "h200": 4800, "h100 80gb hbm3": 3350, "h100 sxm": 3350, "h100 nvl": 3900, "h100 pcie": 2039,
    "a100 sxm4 80gb": 2039, "a100 80gb pcie": 1935, "a100": 1555, "l40s": 864, "l40": 864,
    "l4": 300, "a40": 696, "a10": 600, "t4": 320, "v100": 900,
    # AMD Radeon and Instinct
    "rx 9070 xt": 645, "rx 9070": 645, "rx 9060 xt": 322,
    "rx 7900 xtx": 960, "rx 7900 xt": 800, "rx 7900 gre": 576, "rx 7800 xt": 624,
    "rx 7700 xt": 432, "rx 7600 xt": 288, "rx 7600": 288,
    "rx 6950 xt": 576, "rx 6900 xt": 512, "rx 6800 xt": 512, "rx 6800": 512, "rx 6750 xt": 432,
    "rx 6700 xt": 384, "rx 6650 xt": 280, "rx 6600 xt": 256, "rx 6600": 224,
    "radeon vii": 1024, "pro w7900": 864, "pro w7800": 576,
    "mi300x": 5300, "mi250x": 3277, "mi210": 1638, "mi100": 1229,
    "radeon 8060s": 256, "radeon 8050s": 256,
    # Intel Arc
    "arc b580": 456, "arc b570": 380, "arc a770": 560, "arc a750": 512, "arc a580": 512,
    "arc a380": 186,
}

# Apple silicon: unified memory, by chip and, where two bins differ, by CPU core count.
APPLE_BANDWIDTH_GBPS: dict[str, dict[int | None, float]] = {
    "m1": {None: 68.25}, "m1 pro": {None: 200}, "m1 max": {None: 400}, "m1 ultra": {None: 800},
    "m2": {None: 100}, "m2 pro": {None: 200}, "m2 max": {None: 400}, "m2 ultra": {None: 800},
    "m3": {None: 100}, "m3 pro": {None: 150}, "m3 max": {14: 300, 16: 400},
    "m3 ultra": {None: 819},
    "m4": {None: 120}, "m4 pro": {None: 273}, "m4 max": {14: 410, 16: 546},
    "m5": {None: 153},
}
# fmt: on

# Vendor and trademark words; "radeon" stays where it is the part's name (Radeon VII, 8060S).
_NOISE = re.compile(
    r"\((?:r|tm)\)|®|™|\bnvidia\b|\bgeforce\b|\bamd\b|\bradeon\b(?! (?:vii|8\d{3}s))"
)


def normalize_name(name: str) -> str:
    text = name.lower().replace("-", " ").replace("_", " ")
    text = _NOISE.sub(" ", text)
    text = re.sub(r"[^a-z0-9 ]", " ", text)
    return " ".join(text.split())


def from_clock(memory_clock_mhz: float | None, bus_width_bits: int | None) -> float | None:
    """GB/s from an NVML-style memory clock and bus width; None when either is missing or 0."""
    if not memory_clock_mhz or not bus_width_bits:
        return None
    return round(memory_clock_mhz * 1e6 * 2 * bus_width_bits / 8 / 1e9, 1)


def from_table(name: str) -> float | None:
    """The published bandwidth of a known part, by name; None for parts not in the table."""
    text = f" {normalize_name(name)} "
    best: tuple[int, float] | None = None
    for key, gbps in KNOWN_BANDWIDTH_GBPS.items():
        if f" {key} " in text and (best is None or len(key) > best[0]):
            best = (len(key), gbps)
    return None if best is None else float(best[1])


def apple_bandwidth(chip: str, cpu_cores: int | None) -> float | None:
    """ "Apple M3 Max" with 16 CPU cores -> 400.0."""
    match = re.search(r"\bm(\d+)(?: (pro|max|ultra))?\b", chip.lower())
    if not match:
        return None
    key = f"m{match.group(1)}" + (f" {match.group(2)}" if match.group(2) else "")
    bins = APPLE_BANDWIDTH_GBPS.get(key)
    if not bins:
        return None
    if None in bins:
        return float(bins[None])
    if cpu_cores in bins:
        return float(bins[cpu_cores])
    return float(min(bins.values()))  # an unknown bin: the lower figure, never an overstatement


def best_estimate(
    name: str, memory_clock_mhz: float | None = None, bus_width_bits: int | None = None
) -> tuple[float | None, str | None]:
    """(GB/s, "driver" | "table" | None)."""
    measured = from_clock(memory_clock_mhz, bus_width_bits)
    if measured is not None:
        return measured, "driver"
    known = from_table(name)
    return (known, "table") if known is not None else (None, None)
