"""The GPUs on the PCI bus, whatever their drivers (Linux).

This is the safety net behind the vendor probes: a card whose driver is missing, whose NVML is
broken or whose probe hung still shows up, as a record that says what is known (vendor, PCI
address, the kernel driver bound to it) and why the rest is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.hardware.host import Host
from engine.hardware.records import GPU, IGPU, Device, normalize_pci_bus_id

GPU_VENDORS = {0x10DE: "nvidia", 0x1002: "amd", 0x8086: "intel"}
VENDOR_LABELS = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel"}
BACKENDS = {"nvidia": ("cuda", "vulkan"), "amd": ("rocm", "vulkan"), "intel": ("vulkan",)}
DRIVER_ADVICE = {
    "nvidia": "install the NVIDIA driver (it provides NVML and CUDA)",
    "amd": "load the amdgpu kernel driver (it ships with Linux; check your distribution)",
    "intel": "install vulkan-tools and Intel's Vulkan driver (Mesa)",
}


@dataclass(frozen=True)
class PciGpu:
    bus_id: str
    vendor: str
    device_id: int | None
    driver: str | None  # the kernel driver bound to it: nvidia, nouveau, amdgpu, i915, xe, None


def scan(host: Host) -> list[PciGpu]:
    """Display controllers (PCI class 0x03xxxx) from NVIDIA, AMD and Intel."""
    if host.system != "Linux":
        return []
    found = []
    try:
        folders = sorted(host.path("/sys/bus/pci/devices").iterdir())
    except OSError:
        return []
    for folder in folders:
        try:
            pci_class = int(host.read_value(folder / "class"), 16)
            vendor_id = int(host.read_value(folder / "vendor"), 16)
        except (OSError, ValueError):
            continue
        if pci_class >> 16 != 0x03 or vendor_id not in GPU_VENDORS:
            continue
        try:
            device_id: int | None = int(host.read_value(folder / "device"), 16)
        except (OSError, ValueError):
            device_id = None
        driver_link = folder / "driver"
        driver = driver_link.resolve().name if driver_link.exists() else None
        bus_id = normalize_pci_bus_id(folder.name) or folder.name
        found.append(PciGpu(bus_id, GPU_VENDORS[vendor_id], device_id, driver))
    return found


def placeholder(gpu: PciGpu, why: str) -> Device:
    """A record for a GPU that only the PCI bus knows about."""
    label = VENDOR_LABELS[gpu.vendor]
    vendor_hex = {v: k for k, v in GPU_VENDORS.items()}[gpu.vendor]
    ids = f"{vendor_hex:04x}:{gpu.device_id:04x}" if gpu.device_id is not None else "?"
    driver = f"kernel driver: {gpu.driver}" if gpu.driver else "no kernel driver bound"
    return Device(
        id=f"{gpu.vendor}:{gpu.bus_id}",
        vendor=gpu.vendor,
        name=f"{label} GPU (PCI {ids})",
        kind=_kind(gpu),
        backends=BACKENDS[gpu.vendor],
        source="pci",
        pci_bus_id=gpu.bus_id,
        driver_version=gpu.driver,
        notes=(why, f"{driver}; to see its memory, {DRIVER_ADVICE[gpu.vendor]}"),
    )


def _kind(gpu: PciGpu) -> str:
    # Intel's discrete cards (Arc Alchemist 0x56xx, Battlemage 0xe2xx); the rest are integrated.
    if gpu.vendor == "intel" and not (gpu.device_id and gpu.device_id >> 8 in (0x56, 0xE2)):
        return IGPU
    return GPU
