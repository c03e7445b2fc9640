"""Live memory and utilisation per device, for the Hardware panel and `hearth hw --watch`.

`UsageSampler.sample()` reads what each device's driver reports now: NVML for NVIDIA, amdgpu's
sysfs files for AMD (cheap, no ROCm needed), psutil for the CPU and Apple's unified memory. It
answers at most once per `min_interval_s` (default 1 s) and returns the previous sample when
asked sooner, so a caller cannot make it poll the drivers faster. It blocks for a few
milliseconds; call it off the GUI thread. One sampler belongs to one thread.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.hardware import nvml_probe
from engine.hardware.amd_sysfs import SysfsReader
from engine.hardware.host import Host
from engine.hardware.records import Device

MIN_INTERVAL_S = 1.0


@dataclass(frozen=True)
class UsageSample:
    device_id: str
    time_s: float  # time.monotonic() when taken
    used_bytes: int | None = None
    free_bytes: int | None = None
    total_bytes: int | None = None
    utilization_percent: float | None = None
    shared_used_bytes: int | None = None  # AMD GTT in use
    note: str = ""  # why a value is missing


class UsageSampler:
    def __init__(
        self,
        devices: list[Device] | tuple[Device, ...],
        *,
        host: Host | None = None,
        min_interval_s: float = MIN_INTERVAL_S,
    ):
        self._devices = tuple(devices)
        self._host = host or Host()
        self._min_interval_s = max(min_interval_s, 0.0)
        self._last: tuple[UsageSample, ...] | None = None
        self._last_at = float("-inf")
        self._nvml: Any = None
        self._nvml_problem = ""
        self._psutil: Any = None

    def sample(self) -> tuple[UsageSample, ...]:
        now = time.monotonic()
        if self._last is not None and now - self._last_at < self._min_interval_s:
            return self._last
        self._last = tuple(self._sample_one(d, now) for d in self._devices)
        self._last_at = now
        return self._last

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None

    # -- per source ------------------------------------------------------------------------------

    def _sample_one(self, device: Device, now: float) -> UsageSample:
        try:
            if device.source == "nvml":
                return self._from_nvml(device, now)
            if device.vendor == "amd" and device.source in ("sysfs", "amdsmi"):
                return self._from_amd_sysfs(device, now)
            if device.source in ("psutil", "sysctl"):
                return self._from_psutil(device, now)
        except Exception as exc:  # one device's fault must not cost the others their sample
            return UsageSample(device.id, now, note=f"{type(exc).__name__}: {exc}")
        return UsageSample(device.id, now, note=f"no live figures from {device.source}")

    def _from_nvml(self, device: Device, now: float) -> UsageSample:
        nvml = self._nvml_module()
        if nvml is None:
            return UsageSample(device.id, now, note=self._nvml_problem)
        handle = nvml_probe.open_handle(nvml, device.locator or "index:0")
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        utilization = None
        note = ""
        try:
            utilization = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except nvml.NVMLError as exc:
            note = f"utilization: {nvml_probe.nvml_error_message(nvml, exc)}"
        return UsageSample(
            device.id,
            now,
            used_bytes=int(memory.used),
            free_bytes=int(memory.free),
            total_bytes=int(memory.total),
            utilization_percent=utilization,
            note=note,
        )

    def _nvml_module(self) -> Any:
        if self._nvml is None and not self._nvml_problem:
            try:
                nvml = self._host.load_nvml()
                nvml.nvmlInit()
                self._nvml = nvml
            except Exception as exc:
                self._nvml_problem = f"NVML: {exc}"
        return self._nvml

    def _from_amd_sysfs(self, device: Device, now: float) -> UsageSample:
        # The sysfs probe's locator is the device's folder (under the host's root already).
        folder = Path(device.locator) if device.source == "sysfs" and device.locator else None
        if folder is None and device.pci_bus_id:
            folder = self._host.path(f"/sys/bus/pci/devices/{device.pci_bus_id}")
        if folder is None:
            return UsageSample(device.id, now, note="no sysfs folder for this GPU")
        reader = SysfsReader(self._host, folder)
        total = reader.integer("mem_info_vram_total")
        used = reader.integer("mem_info_vram_used")
        busy = reader.integer("gpu_busy_percent")
        return UsageSample(
            device.id,
            now,
            used_bytes=used,
            free_bytes=total - used if total is not None and used is not None else None,
            total_bytes=total,
            utilization_percent=float(busy) if busy is not None else None,
            shared_used_bytes=reader.integer("mem_info_gtt_used", quiet=True),
            note="; ".join(reader.notes),
        )

    def _from_psutil(self, device: Device, now: float) -> UsageSample:
        if self._psutil is None:
            self._psutil = self._host.load_psutil()
        memory = self._psutil.virtual_memory()
        total, available = int(memory.total), int(memory.available)
        utilization = None
        note = ""
        if device.source == "psutil":
            # Since the previous call; the first call after start answers 0.0.
            utilization = float(self._psutil.cpu_percent(interval=None))
        else:
            note = "GPU utilization: macOS reports it only to administrators (powermetrics)"
        return UsageSample(
            device.id,
            now,
            used_bytes=total - available,
            free_bytes=available,
            total_bytes=total,
            utilization_percent=utilization,
            note=note,
        )
