"""Hardware: every GPU and its memory, the CPU, and what the installed engine can use.

    detect_devices(timeout_s=...) -> list[Device]    GPUs first, CPU last; never raises
    detect(timeout_s=...) -> Detection               the same, with a report per probe
    probe_engine_devices(timeout_s=10) -> EngineView  llama.cpp's own view, from a child process
    reconcile(devices, engine_view) -> list[DeviceStatus]
    UsageSampler(devices).sample()                   live VRAM and utilisation, at most 1 Hz
    remote.probe_remote("10.0.0.2:50052") -> RemoteHost   a helper machine (llama.cpp RPC)

Inside the engine worker (llama.cpp loaded): `engine.llama.devices.list_engine_devices`.
Nothing here loads llama.cpp, NVML or amdsmi at import time.
"""

from engine.hardware.detection import DEFAULT_TIMEOUT_S, detect, detect_devices
from engine.hardware.engine_view import EngineDevice, EngineView, probe_engine_devices
from engine.hardware.host import Host
from engine.hardware.monitor import UsageSample, UsageSampler
from engine.hardware.reconcile import BuildHint, DeviceStatus, build_for, reconcile
from engine.hardware.records import CpuDetails, Detection, Device, PcieLink, ProbeReport

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "BuildHint",
    "CpuDetails",
    "Detection",
    "Device",
    "DeviceStatus",
    "EngineDevice",
    "EngineView",
    "Host",
    "PcieLink",
    "ProbeReport",
    "UsageSample",
    "UsageSampler",
    "build_for",
    "detect",
    "detect_devices",
    "probe_engine_devices",
    "reconcile",
]
