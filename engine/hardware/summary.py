"""Short human-readable phrases about a device, shared by `hearth hw` and the Hardware panel."""

from __future__ import annotations

from engine.hardware.engine_view import EngineView
from engine.hardware.records import CPU, Device
from engine.units import format_bytes


def memory_phrase(device: Device, free: int | None = None, total: int | None = None) -> str:
    """ "21.3 GiB free of 24.0 GiB" (free/total may come from the engine when drivers lack them)."""
    free = device.free_bytes if free is None else free
    total = device.total_bytes if total is None else total
    if total is None:
        return "memory unknown"
    text = (
        f"{format_bytes(free)} free of {format_bytes(total)}"
        if free is not None
        else (f"{format_bytes(total)}")
    )
    if device.gpu_memory_limit_bytes is not None:
        text += f" (GPU may use {format_bytes(device.gpu_memory_limit_bytes)})"
    elif device.unified_memory and device.shared_total_bytes:
        text += f" + {format_bytes(device.shared_total_bytes)} shared"
    return text


def bandwidth_phrase(device: Device) -> str:
    if device.memory_bandwidth_gbps is None:
        return "-"
    source = " (spec)" if device.bandwidth_source == "table" else ""
    return f"{device.memory_bandwidth_gbps:.0f} GB/s{source}"


def detail_phrases(device: Device) -> list[str]:
    """The facts worth a second line: architecture, link, driver, address, CPU features."""
    parts = []
    if device.compute_capability:
        parts.append(f"compute capability {device.compute_capability}")
    if device.gfx_target:
        parts.append(device.gfx_target)
    if device.unified_memory:
        parts.append("unified memory")
    if device.pcie is not None:
        parts.append(f"PCIe {device.pcie}")
    if device.driver_version:
        parts.append(f"driver {device.driver_version}")
    if device.pci_bus_id:
        parts.append(f"bus {device.pci_bus_id}")
    if device.kind == CPU and device.cpu is not None:
        cores = device.cpu.physical_cores
        threads = device.cpu.logical_cores
        if cores or threads:
            parts.append(f"{cores or '?'} cores, {threads or '?'} threads")
        if device.cpu.instruction_sets:
            parts.append(", ".join(device.cpu.instruction_sets))
    parts.append(f"via {device.source}")
    return parts


def engine_phrase(view: EngineView) -> str:
    if not view.ok:
        return f"Engine: not asked ({view.error})"
    offload = "yes" if view.gpu_offload else "no"
    backends = ", ".join(view.backends) or "none"
    version = f"llama-cpp-python {view.llama_cpp_version}, " if view.llama_cpp_version else ""
    return f"Engine: {version}backends {backends}; GPU offload {offload}"
