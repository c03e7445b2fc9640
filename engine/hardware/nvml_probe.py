"""NVIDIA GPUs through NVML (the `nvidia-ml-py` bindings, imported as pynvml).

NVML ships with the NVIDIA driver, so "NVML Shared Library Not Found" on a machine without an
NVIDIA GPU is the ordinary case and is reported as `unavailable`, not as a failure. Each
attribute of a GPU is asked for on its own: a GPU that does not support a query (bus width on
some laptop parts, PCIe on SXM boards) keeps the rest of its record and a note says what is
missing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from engine.hardware import bandwidth
from engine.hardware.host import Deadline, Host
from engine.hardware.records import (
    FAILED,
    GPU,
    OK,
    UNAVAILABLE,
    Device,
    PcieLink,
    ProbeResult,
    normalize_pci_bus_id,
)

T = TypeVar("T")

# NVML errors meaning "there is no usable NVIDIA driver here", as opposed to a fault.
_ABSENT_ERRORS = ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")


def text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def nvml_error_message(nvml: Any, exc: BaseException) -> str:
    message = text(exc) or type(exc).__name__
    value = getattr(exc, "value", None)
    if value == getattr(nvml, "NVML_ERROR_NO_PERMISSION", object()):
        message += " (the user may need to be in the group that owns /dev/nvidia*)"
    elif value == getattr(nvml, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", object()):
        message += " (the driver was updated; restart the computer)"
    return message


def _is_absent(nvml: Any, exc: BaseException) -> bool:
    value = getattr(exc, "value", None)
    return any(value == getattr(nvml, name, object()) for name in _ABSENT_ERRORS)


def probe(host: Host, deadline: Deadline) -> ProbeResult:
    try:
        nvml = host.load_nvml()
    except ImportError as exc:
        return ProbeResult(status=UNAVAILABLE, message=f"pynvml is not importable ({exc})")
    error_type = getattr(nvml, "NVMLError", Exception)
    try:
        nvml.nvmlInit()
    except error_type as exc:
        status = UNAVAILABLE if _is_absent(nvml, exc) else FAILED
        return ProbeResult(status=status, message=f"NVML: {nvml_error_message(nvml, exc)}")
    try:
        return _probe_initialised(nvml, error_type)
    finally:
        with contextlib.suppress(error_type):
            nvml.nvmlShutdown()


def _probe_initialised(nvml: Any, error_type: type[BaseException]) -> ProbeResult:
    try:
        count = nvml.nvmlDeviceGetCount()
    except error_type as exc:
        return ProbeResult(status=FAILED, message=f"NVML: {nvml_error_message(nvml, exc)}")
    try:
        driver: str | None = text(nvml.nvmlSystemGetDriverVersion())
    except error_type:
        driver = None
    devices = [_describe(nvml, error_type, index, driver) for index in range(count)]
    return ProbeResult(devices=tuple(devices), status=OK, message=f"{count} NVIDIA GPU(s)")


def _describe(nvml: Any, error_type: type[BaseException], index: int, driver: str | None) -> Device:
    notes: list[str] = []

    def ask(what: str, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except error_type as exc:
            notes.append(f"{what}: {nvml_error_message(nvml, exc)}")
            return None

    handle = ask("handle", nvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return Device(
            id=f"nvidia:{index}",
            vendor="nvidia",
            name=f"NVIDIA GPU {index}",
            kind=GPU,
            backends=("cuda", "vulkan"),
            source="nvml",
            driver_version=driver,
            locator=f"index:{index}",
            notes=tuple(notes),
        )
    name_raw = ask("name", nvml.nvmlDeviceGetName, handle)
    name = text(name_raw) if name_raw is not None else f"NVIDIA GPU {index}"
    memory = ask("memory", nvml.nvmlDeviceGetMemoryInfo, handle)
    capability = ask("compute capability", nvml.nvmlDeviceGetCudaComputeCapability, handle)
    pci = ask("PCI bus id", nvml.nvmlDeviceGetPciInfo, handle)
    bus_id = normalize_pci_bus_id(getattr(pci, "busId", None)) if pci is not None else None
    clock = ask("memory clock", nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_MEM)
    width = ask("memory bus width", nvml.nvmlDeviceGetMemoryBusWidth, handle)
    gbps, gbps_source = bandwidth.best_estimate(name, clock, width)
    if gbps is None:
        notes.append("memory bandwidth: not reported and not a known part")
    pcie = PcieLink(
        generation=ask("PCIe generation", nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        width=ask("PCIe width", nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        max_generation=ask("PCIe max generation", nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        max_width=ask("PCIe max width", nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    )
    has_pcie = any(v is not None for v in vars(pcie).values())
    return Device(
        id=f"nvidia:{bus_id or index}",
        vendor="nvidia",
        name=name,
        kind=GPU,
        backends=("cuda", "vulkan"),
        source="nvml",
        total_bytes=_int_attr(memory, "total"),
        free_bytes=_int_attr(memory, "free"),
        used_bytes=_int_attr(memory, "used"),
        compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
        memory_bandwidth_gbps=gbps,
        bandwidth_source=gbps_source,
        pcie=pcie if has_pcie else None,
        pci_bus_id=bus_id,
        driver_version=driver,
        locator=f"pci:{bus_id}" if bus_id else f"index:{index}",
        notes=tuple(notes),
    )


def _int_attr(obj: Any, name: str) -> int | None:
    value = getattr(obj, name, None) if obj is not None else None
    return int(value) if value is not None else None


def open_handle(nvml: Any, locator: str) -> Any:
    """The NVML handle for a `Device.locator` written by this probe (for the live monitor)."""
    kind, _, value = locator.partition(":")
    if kind == "pci":
        return nvml.nvmlDeviceGetHandleByPciBusId(value)
    return nvml.nvmlDeviceGetHandleByIndex(int(value))
