"""AMD GPUs through the amdgpu driver's sysfs files (Linux), when amdsmi is not importable.

    /sys/class/drm/cardN/device/vendor                0x1002
    /sys/class/drm/cardN/device/mem_info_vram_total   bytes (an APU's small carve-out)
    /sys/class/drm/cardN/device/mem_info_vram_used
    /sys/class/drm/cardN/device/mem_info_gtt_total    host memory the GPU can map (APUs use it)
    /sys/class/drm/cardN/device/current_link_speed    "16.0 GT/s PCIe"
    /sys/class/kfd/kfd/topology/nodes/K/properties    gfx_target_version, drm_render_minor

A file that is missing, unreadable or holds something odd costs only its own value; the note
says which file and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from engine.hardware import amd_parts, bandwidth
from engine.hardware.host import Deadline, Host
from engine.hardware.records import (
    GIB,
    GPU,
    IGPU,
    OK,
    UNAVAILABLE,
    Device,
    PcieLink,
    ProbeResult,
    normalize_pci_bus_id,
)

AMD_VENDOR_ID = 0x1002
_LINK_SPEED_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


@dataclass
class SysfsReader:
    """Reads values under one device folder, collecting a note for each value it cannot read."""

    host: Host
    folder: Path
    notes: list[str] = field(default_factory=list)

    def text(self, name: str, *, quiet: bool = False) -> str | None:
        try:
            return self.host.read_value(self.folder / name)
        except FileNotFoundError:
            if not quiet:
                self.notes.append(f"{name}: not present")
        except PermissionError:
            self.notes.append(f"{name}: permission denied")
        except OSError as exc:
            self.notes.append(f"{name}: unreadable ({exc.strerror or type(exc).__name__})")
        return None

    def integer(self, name: str, *, base: int = 10, quiet: bool = False) -> int | None:
        raw = self.text(name, quiet=quiet)
        if raw is None:
            return None
        try:
            value = int(raw, base)
        except ValueError:
            self.notes.append(f"{name}: unexpected content {raw[:40]!r}")
            return None
        if value < 0:
            self.notes.append(f"{name}: negative value {value}")
            return None
        return value


def probe(host: Host, deadline: Deadline) -> ProbeResult:
    if host.system != "Linux":
        return ProbeResult(status=UNAVAILABLE, message="sysfs exists only on Linux")
    drm = host.path("/sys/class/drm")
    try:
        cards = sorted(
            (p for p in drm.iterdir() if re.fullmatch(r"card\d+", p.name)),
            key=lambda p: int(p.name[4:]),
        )
    except OSError as exc:
        return ProbeResult(status=UNAVAILABLE, message=f"no GPU driver loaded ({exc.strerror})")
    kfd = kfd_nodes(host)
    devices = []
    for card in cards:
        reader = SysfsReader(host, card / "device")
        vendor = reader.integer("vendor", base=16, quiet=True)
        if vendor != AMD_VENDOR_ID:
            continue
        devices.append(describe(host, reader, card.name, kfd))
    return ProbeResult(devices=tuple(devices), status=OK, message=f"{len(devices)} AMD GPU(s)")


def describe(host: Host, reader: SysfsReader, card: str, kfd: dict[int, dict[str, int]]) -> Device:
    device_id = reader.integer("device", base=16)
    revision = reader.integer("revision", base=16, quiet=True)
    part = amd_parts.lookup(device_id)
    name = _name(host, reader, device_id, revision, part)
    node = kfd.get(render_minor(reader.folder)) or {}
    gfx = amd_parts.gfx_from_kfd_version(node.get("gfx_target_version", 0))
    if gfx is None and part is not None:
        gfx = part.gfx_target
    vram_total = reader.integer("mem_info_vram_total")
    vram_used = reader.integer("mem_info_vram_used")
    gtt_total = reader.integer("mem_info_gtt_total", quiet=True)
    gtt_used = reader.integer("mem_info_gtt_used", quiet=True)
    is_apu = _is_apu(part, node, reader.notes, vram_total, gtt_total)
    gbps, gbps_source = bandwidth.best_estimate(name)
    if gbps is None:
        reader.notes.append("memory bandwidth: not a known part")
    bus_id = normalize_pci_bus_id(_pci_slot(reader))
    return Device(
        id=f"amd:{bus_id or card}",
        vendor="amd",
        name=name,
        kind=IGPU if is_apu else GPU,
        backends=("rocm", "vulkan"),
        source="sysfs",
        total_bytes=vram_total,
        used_bytes=vram_used,
        free_bytes=vram_total - vram_used
        if vram_total is not None and vram_used is not None
        else None,
        unified_memory=is_apu,
        shared_total_bytes=gtt_total,
        shared_used_bytes=gtt_used,
        gfx_target=gfx,
        memory_bandwidth_gbps=gbps,
        bandwidth_source=gbps_source,
        pcie=None if is_apu else pcie_link(reader),
        pci_bus_id=bus_id,
        driver_version=_driver_version(host),
        locator=str(reader.folder),
        notes=tuple(reader.notes),
    )


def _name(
    host: Host,
    reader: SysfsReader,
    device_id: int | None,
    revision: int | None,
    part: amd_parts.AmdPart | None,
) -> str:
    product = reader.text("product_name", quiet=True)
    if product:
        return product
    if device_id is not None:
        from_ids = amd_parts.marketing_name(host, device_id, revision)
        if from_ids:
            return from_ids
    if part is not None:
        return f"AMD {part.name}"
    return f"AMD GPU (PCI 1002:{device_id:04x})" if device_id is not None else "AMD GPU"


def _is_apu(
    part: amd_parts.AmdPart | None,
    node: dict[str, int],
    notes: list[str],
    vram_total: int | None,
    gtt_total: int | None,
) -> bool:
    if part is not None:
        return part.is_apu
    if node.get("cpu_cores_count", 0) > 0 and node.get("simd_count", 0) > 0:
        return True  # KFD shows an APU as one node with both CPU cores and SIMDs
    if vram_total is not None and gtt_total and vram_total <= 2 * GIB and gtt_total > vram_total:
        notes.append("not a known part; its small VRAM suggests an integrated GPU")
    return False


def pcie_link(reader: SysfsReader) -> PcieLink | None:
    link = PcieLink(
        generation=_link_generation(reader.text("current_link_speed", quiet=True)),
        width=reader.integer("current_link_width", quiet=True),
        max_generation=_link_generation(reader.text("max_link_speed", quiet=True)),
        max_width=reader.integer("max_link_width", quiet=True),
    )
    return link if any(v is not None for v in vars(link).values()) else None


def _link_generation(speed: str | None) -> int | None:
    match = re.match(r"\s*([\d.]+)\s*GT/s", speed or "")
    return _LINK_SPEED_TO_GEN.get(float(match.group(1))) if match else None


def _pci_slot(reader: SysfsReader) -> str | None:
    uevent = reader.text("uevent", quiet=True) or ""
    for line in uevent.splitlines():
        if line.startswith("PCI_SLOT_NAME="):
            return line.split("=", 1)[1]
    return None


def render_minor(device_folder: Path) -> int | None:
    try:
        for entry in (device_folder / "drm").iterdir():
            if entry.name.startswith("renderD") and entry.name[7:].isdigit():
                return int(entry.name[7:])
    except OSError:
        pass
    return None


def _driver_version(host: Host) -> str:
    try:
        return f"amdgpu {host.read_value(host.path('/sys/module/amdgpu/version'))}"
    except OSError:
        return f"amdgpu (Linux {host.kernel})"


def kfd_nodes(host: Host) -> dict[int, dict[str, int]]:
    """ROCm's kernel topology, keyed by DRM render minor; empty without the KFD driver."""
    nodes: dict[int, dict[str, int]] = {}
    try:
        folders = list(host.path("/sys/class/kfd/kfd/topology/nodes").iterdir())
    except OSError:
        return nodes
    for folder in folders:
        try:
            content = host.read(folder / "properties")
        except OSError:
            continue
        props: dict[str, int] = {}
        for line in content.splitlines():
            key, _, value = line.partition(" ")
            try:
                props[key] = int(value)
            except ValueError:
                continue
        minor = props.get("drm_render_minor", 0)
        if minor > 0:
            nodes[minor] = props
    return nodes
