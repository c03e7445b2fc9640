"""Intel and any other Vulkan device through `vulkaninfo --summary` (the vulkan-tools package).

The summary names each physical device, its vendor, type and driver, but not its memory; a
Vulkan build of the engine reports the memory itself (see reconcile). Software rasterisers
(llvmpipe, lavapipe, SwiftShader: deviceType CPU) are left out: llama.cpp's Vulkan backend would
only be a slower CPU.
"""

from __future__ import annotations

import re

from engine.hardware import bandwidth
from engine.hardware.host import Deadline, Host
from engine.hardware.records import FAILED, GPU, IGPU, OK, UNAVAILABLE, Device, ProbeResult

VULKANINFO_TIMEOUT_S = 3.0

VENDOR_IDS = {
    0x10DE: "nvidia",
    0x1002: "amd",
    0x8086: "intel",
    0x106B: "apple",
    0x13B5: "arm",
    0x5143: "qualcomm",
}
NATIVE_BACKENDS = {"nvidia": ("cuda", "vulkan"), "amd": ("rocm", "vulkan")}
_KINDS = {
    "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": GPU,
    "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": IGPU,
    "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": GPU,
}


def probe(host: Host, deadline: Deadline) -> ProbeResult:
    output = host.run(["vulkaninfo", "--summary"], deadline.left(VULKANINFO_TIMEOUT_S))
    if output.returncode is None:
        missing = "not installed" in output.problem
        hint = " (install vulkan-tools to see Intel and other Vulkan GPUs)" if missing else ""
        return ProbeResult(status=UNAVAILABLE if missing else FAILED, message=output.problem + hint)
    summaries = parse_summary(output.stdout)
    if not summaries:
        first_error = next(
            (line.strip() for line in output.stderr.splitlines() if "ERROR" in line), ""
        )
        status = OK if output.returncode == 0 else FAILED
        message = first_error or f"no Vulkan devices (exit status {output.returncode})"
        return ProbeResult(status=status, message=message)
    devices = []
    skipped = []
    for index, fields in enumerate(summaries):
        device = to_device(index, fields)
        if device is None:
            skipped.append(fields.get("deviceName", f"GPU{index}"))
        else:
            devices.append(device)
    message = f"{len(devices)} Vulkan GPU(s)"
    if skipped:
        message += f"; skipped software renderer(s): {', '.join(skipped)}"
    return ProbeResult(devices=tuple(devices), status=OK, message=message)


def parse_summary(text: str) -> list[dict[str, str]]:
    """The `GPUn:` blocks of `vulkaninfo --summary`, each as {field: value}."""
    devices: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    in_devices = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "Devices:":
            in_devices = True
            continue
        if not in_devices:
            continue
        if re.fullmatch(r"GPU\d+:", stripped):
            current = {}
            devices.append(current)
            continue
        if current is not None and "=" in stripped:
            key, _, value = stripped.partition("=")
            current[key.strip()] = value.strip()
    return devices


def _hex(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value.split()[0], 0)
    except ValueError:
        return None


def to_device(index: int, fields: dict[str, str]) -> Device | None:
    kind = _KINDS.get(fields.get("deviceType", ""))
    if kind is None:
        return None
    vendor_id = _hex(fields.get("vendorID"))
    vendor = VENDOR_IDS.get(vendor_id or -1, "other")
    name = fields.get("deviceName") or f"Vulkan GPU {index}"
    gbps = bandwidth.from_table(name)
    notes = ["memory: vulkaninfo --summary does not report it; a Vulkan engine build will"]
    if gbps is None:
        notes.append("memory bandwidth: not a known part")
    driver = fields.get("driverInfo") or fields.get("driverVersion")
    if fields.get("driverName") and driver and fields["driverName"] not in driver:
        driver = f"{fields['driverName']} {driver}"
    return Device(
        id=f"vulkan:{index}",
        vendor=vendor,
        name=name,
        kind=kind,
        backends=NATIVE_BACKENDS.get(vendor, ("vulkan",)),
        source="vulkaninfo",
        unified_memory=kind == IGPU,
        memory_bandwidth_gbps=gbps,
        bandwidth_source="table" if gbps is not None else None,
        driver_version=driver,
        locator=f"vulkan:{index}",
        notes=tuple(notes),
    )
