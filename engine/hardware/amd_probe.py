"""AMD GPUs: through amdsmi (ROCm's management library) when it is importable, else sysfs.

amdsmi's answers differ between ROCm releases (keys come and go), so every value is read with a
default and a missing one becomes a note. GTT memory and APU detection come from sysfs even when
amdsmi answers, since amdsmi does not report them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from engine.hardware import amd_parts, amd_sysfs, bandwidth
from engine.hardware.host import Deadline, Host
from engine.hardware.records import (
    GPU,
    IGPU,
    OK,
    Device,
    PcieLink,
    ProbeResult,
    normalize_pci_bus_id,
)

MIB = 1024**2


def probe(host: Host, deadline: Deadline) -> ProbeResult:
    try:
        amdsmi = host.load_amdsmi()
    except ImportError:
        result = amd_sysfs.probe(host, deadline)
        return ProbeResult(result.devices, result.status, f"sysfs: {result.message}")
    except Exception as exc:  # a broken ROCm install can raise anything from its loader
        result = amd_sysfs.probe(host, deadline)
        note = f"amdsmi failed to load ({exc}); used sysfs"
        return ProbeResult(result.devices, result.status, f"{result.message} ({note})")
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:
        result = amd_sysfs.probe(host, deadline)
        note = f"amdsmi_init failed ({exc}); used sysfs"
        return ProbeResult(result.devices, result.status, f"{result.message} ({note})")
    try:
        handles = amdsmi.amdsmi_get_processor_handles()
        devices = tuple(_describe(host, amdsmi, handle, i) for i, handle in enumerate(handles))
    finally:
        with contextlib.suppress(Exception):
            amdsmi.amdsmi_shut_down()
    return ProbeResult(devices=devices, status=OK, message=f"{len(devices)} AMD GPU(s) (amdsmi)")


def _describe(host: Host, amdsmi: Any, handle: Any, index: int) -> Device:
    notes: list[str] = []

    def ask(what: str, call: Callable[[Any], Any]) -> Any:
        try:
            return call(handle)
        except Exception as exc:
            notes.append(f"{what}: {exc}")
            return None

    asic = ask("ASIC info", amdsmi.amdsmi_get_gpu_asic_info) or {}
    bus_id = normalize_pci_bus_id(ask("PCI address", amdsmi.amdsmi_get_gpu_device_bdf))
    vram = ask("VRAM usage", amdsmi.amdsmi_get_gpu_vram_usage) or {}
    vram_info = ask("VRAM info", amdsmi.amdsmi_get_gpu_vram_info) or {}
    driver = ask("driver", amdsmi.amdsmi_get_gpu_driver_info) or {}
    pcie_info = ask("PCIe", amdsmi.amdsmi_get_pcie_info) or {}

    device_id = _as_int(asic.get("device_id"))
    part = amd_parts.lookup(device_id)
    name = str(asic.get("market_name") or (part and f"AMD {part.name}") or f"AMD GPU {index}")
    gfx = asic.get("target_graphics_version") or (part.gfx_target if part else None)
    gfx = str(gfx) if gfx and str(gfx).startswith("gfx") else (part.gfx_target if part else None)
    total = _mib_to_bytes(vram.get("vram_total"))
    used = _mib_to_bytes(vram.get("vram_used"))
    gbps = _as_float(vram_info.get("vram_max_bandwidth"))
    source = "driver" if gbps else None
    if not gbps:
        gbps, source = bandwidth.best_estimate(name)
    if gbps is None:
        notes.append("memory bandwidth: not reported and not a known part")

    # sysfs adds GTT (host memory the GPU maps) and a second opinion on APU-ness.
    gtt_total = gtt_used = None
    node: dict[str, int] = {}
    if bus_id and host.system == "Linux":
        reader = amd_sysfs.SysfsReader(host, host.path(f"/sys/bus/pci/devices/{bus_id}"))
        gtt_total = reader.integer("mem_info_gtt_total", quiet=True)
        gtt_used = reader.integer("mem_info_gtt_used", quiet=True)
        node = amd_sysfs.kfd_nodes(host).get(amd_sysfs.render_minor(reader.folder)) or {}
        gfx = gfx or amd_parts.gfx_from_kfd_version(node.get("gfx_target_version", 0))
        notes.extend(reader.notes)
    is_apu = bool(part and part.is_apu) or (
        node.get("cpu_cores_count", 0) > 0 and node.get("simd_count", 0) > 0
    )
    return Device(
        id=f"amd:{bus_id or index}",
        vendor="amd",
        name=name,
        kind=IGPU if is_apu else GPU,
        backends=("rocm", "vulkan"),
        source="amdsmi",
        total_bytes=total,
        used_bytes=used,
        free_bytes=total - used if total is not None and used is not None else None,
        unified_memory=is_apu,
        shared_total_bytes=gtt_total,
        shared_used_bytes=gtt_used,
        gfx_target=gfx,
        memory_bandwidth_gbps=gbps,
        bandwidth_source=source,
        pcie=None if is_apu else _pcie(pcie_info),
        pci_bus_id=bus_id,
        driver_version=_driver_text(driver),
        locator=f"pci:{bus_id}" if bus_id else f"index:{index}",
        notes=tuple(notes),
    )


def _pcie(info: dict[str, Any]) -> PcieLink | None:
    static, metric = info.get("pcie_static") or {}, info.get("pcie_metric") or {}
    link = PcieLink(
        generation=_gen_from_mts(metric.get("pcie_speed")),
        width=_as_int(metric.get("pcie_width")),
        max_generation=_as_int(static.get("pcie_interface_version"))
        or _gen_from_mts(static.get("max_pcie_speed")),
        max_width=_as_int(static.get("max_pcie_width")),
    )
    return link if any(v is not None for v in vars(link).values()) else None


def _gen_from_mts(speed: Any) -> int | None:
    # amdsmi reports link speed in MT/s: 2500, 5000, 8000, 16000, 32000.
    mts = _as_int(speed)
    table = {2500: 1, 5000: 2, 8000: 3, 16000: 4, 32000: 5, 64000: 6}
    return table.get(mts) if mts is not None else None


def _driver_text(driver: dict[str, Any]) -> str | None:
    name, version = driver.get("driver_name"), driver.get("driver_version")
    if not version:
        return None
    return f"{name} {version}" if name else str(version)


def _as_int(value: Any) -> int | None:
    if value is None or value == "N/A":
        return None
    try:
        return int(value, 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        return None


def _as_float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "N/A") else None
    except (TypeError, ValueError):
        return None


def _mib_to_bytes(value: Any) -> int | None:
    mib = _as_int(value)
    return mib * MIB if mib is not None else None
