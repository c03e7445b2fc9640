"""What detection found: one `Device` per accelerator and one for the CPU, and how each probe went.

Everything here is a frozen dataclass of plain values, so it can cross a process boundary as JSON
(`to_dict`) and be compared in tests. A value the probe could not learn is None, and `notes` says
why, in words a person can act on ("NVML: Insufficient Permissions", "vulkaninfo is not installed").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

GIB = 1024**3

# Kinds of device, mirroring llama.cpp's ggml_backend_dev_type where they overlap.
GPU = "gpu"  # dedicated memory
IGPU = "igpu"  # shares the host's memory (APU, Apple silicon, Intel integrated)
CPU = "cpu"

BACKENDS = ("cuda", "rocm", "metal", "vulkan", "cpu")


@dataclass(frozen=True)
class PcieLink:
    """The PCIe link a device sits on: what it runs at now and the most it can do."""

    generation: int | None = None
    width: int | None = None
    max_generation: int | None = None
    max_width: int | None = None

    def __str__(self) -> str:
        def part(gen: int | None, width: int | None) -> str:
            return f"Gen{gen if gen else '?'} x{width if width else '?'}"

        now = part(self.generation, self.width)
        most = part(self.max_generation, self.max_width)
        return now if most == now else f"{now} (max {most})"


@dataclass(frozen=True)
class CpuDetails:
    physical_cores: int | None
    logical_cores: int | None
    instruction_sets: tuple[str, ...] = ()  # the ones that matter to llama.cpp: AVX2, NEON, ...


@dataclass(frozen=True)
class Device:
    """One accelerator, or the CPU. Memory figures are bytes; None means not known (see notes)."""

    id: str  # stable within a run: "nvidia:0000:01:00.0", "amd:card1", "apple:0", "cpu"
    vendor: str  # nvidia, amd, intel, apple, arm, qualcomm, other
    name: str
    kind: str  # GPU, IGPU or CPU
    backends: tuple[str, ...]  # llama.cpp backends that could drive it, best first
    source: str  # the probe that found it: nvml, amdsmi, sysfs, sysctl, vulkaninfo, pci, psutil
    total_bytes: int | None = None
    free_bytes: int | None = None
    used_bytes: int | None = None
    unified_memory: bool = False
    # Host memory the GPU can also map (AMD GTT); counts towards what an APU can use.
    shared_total_bytes: int | None = None
    shared_used_bytes: int | None = None
    # The most a unified-memory GPU may wire for itself (Metal's working-set limit).
    gpu_memory_limit_bytes: int | None = None
    compute_capability: str | None = None  # NVIDIA, "8.9"
    gfx_target: str | None = None  # AMD, "gfx1100"
    memory_bandwidth_gbps: float | None = None  # GB/s (10^9 bytes per second)
    bandwidth_source: str | None = None  # "driver" (clock x bus width) or "table" (known part)
    pcie: PcieLink | None = None
    pci_bus_id: str | None = None  # "0000:01:00.0", lower case, as llama.cpp reports it
    driver_version: str | None = None
    cpu: CpuDetails | None = None
    locator: str | None = None  # how the monitor finds it again (NVML bus id, sysfs path)
    notes: tuple[str, ...] = ()

    @property
    def is_gpu(self) -> bool:
        return self.kind in (GPU, IGPU)

    @property
    def memory_for_models_bytes(self) -> int | None:
        """The memory llama.cpp could place weights and KV cache in on this device."""
        if self.gpu_memory_limit_bytes is not None:
            return self.gpu_memory_limit_bytes
        if self.unified_memory and self.total_bytes is not None and self.shared_total_bytes:
            return self.total_bytes + self.shared_total_bytes
        return self.total_bytes

    def with_note(self, note: str) -> Device:
        return dataclasses.replace(self, notes=(*self.notes, note))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Device:
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        if values.get("pcie") is not None:
            values["pcie"] = PcieLink(**values["pcie"])
        if values.get("cpu") is not None:
            cpu = dict(values["cpu"])
            cpu["instruction_sets"] = tuple(cpu.get("instruction_sets", ()))
            values["cpu"] = CpuDetails(**cpu)
        for name in ("backends", "notes"):
            values[name] = tuple(values.get(name, ()))
        return cls(**values)


# How one probe went.
OK = "ok"  # ran and answered (it may have found no devices)
UNAVAILABLE = "unavailable"  # not applicable here: no driver, tool not installed, other OS
FAILED = "failed"  # raised or answered with an error
TIMED_OUT = "timed_out"  # did not answer before the deadline


@dataclass(frozen=True)
class ProbeReport:
    name: str
    status: str
    message: str = ""
    elapsed_s: float = 0.0
    device_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ProbeResult:
    """What one probe hands back to the detector."""

    devices: tuple[Device, ...] = ()
    status: str = OK
    message: str = ""


@dataclass(frozen=True)
class Detection:
    devices: tuple[Device, ...]  # GPUs first, CPU last
    probes: tuple[ProbeReport, ...] = ()
    elapsed_s: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def gpus(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.is_gpu)

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": [d.to_dict() for d in self.devices],
            "probes": [p.to_dict() for p in self.probes],
            "elapsed_s": self.elapsed_s,
            "notes": list(self.notes),
        }


def normalize_pci_bus_id(bus_id: str | bytes | None) -> str | None:
    """ "00000000:01:00.0" (NVML) or "0000:01:00.0" -> "0000:01:00.0", as llama.cpp writes it."""
    if bus_id is None:
        return None
    text = bus_id.decode(errors="replace") if isinstance(bus_id, bytes) else str(bus_id)
    text = text.strip().strip("\x00").lower()
    parts = text.split(":")
    if len(parts) != 3:
        return text or None
    domain, bus, rest = parts
    try:
        domain = f"{int(domain, 16):04x}"
    except ValueError:
        return text
    return f"{domain}:{bus}:{rest}"
