"""Apple silicon GPUs through sysctl: the chip, its unified memory and Metal's working-set limit.

The GPU and CPU share one pool of memory, but macOS lets the GPU wire only part of it: Metal's
`recommendedMaxWorkingSetSize`, which llama.cpp treats as the device's total. Asking Metal needs
Objective-C; without it we use macOS's default rule (2/3 of RAM up to 36 GB, 3/4 above), or the
administrator's override `iogpu.wired_limit_mb` when it is set.
"""

from __future__ import annotations

from engine.hardware import bandwidth
from engine.hardware.host import Deadline, Host
from engine.hardware.records import GIB, IGPU, OK, UNAVAILABLE, Device, ProbeResult
from engine.hardware.sysctl import as_int, read_sysctl

SYSCTL_NAMES = [
    "hw.memsize",
    "machdep.cpu.brand_string",
    "hw.model",
    "hw.physicalcpu",
    "kern.osproductversion",
    "iogpu.wired_limit_mb",
]

MIB = 1024**2


def metal_working_set_limit(memory_bytes: int, wired_limit_mb: int | None) -> tuple[int, str]:
    """(bytes, how it was found)."""
    if wired_limit_mb:
        return wired_limit_mb * MIB, "iogpu.wired_limit_mb"
    share = 3 / 4 if memory_bytes > 36 * GIB else 2 / 3
    return int(memory_bytes * share), "macOS default"


def probe(host: Host, deadline: Deadline) -> ProbeResult:
    if host.system != "Darwin":
        return ProbeResult(status=UNAVAILABLE, message="not macOS")
    if host.machine not in ("arm64", "aarch64"):
        return ProbeResult(status=UNAVAILABLE, message="an Intel Mac: no Apple GPU")
    values, problem = read_sysctl(host, deadline, SYSCTL_NAMES)
    notes: list[str] = []
    if problem:
        notes.append(f"sysctl: {problem}")
    chip = values.get("machdep.cpu.brand_string") or "Apple silicon"
    memory = as_int(values, "hw.memsize")
    free = None
    try:
        ram = host.load_psutil().virtual_memory()
        memory = memory or int(ram.total)
        free = int(ram.available)
    except Exception as exc:  # psutil missing or failing costs only the free figure
        notes.append(f"free memory: {exc}")
    limit = None
    if memory:
        limit, how = metal_working_set_limit(memory, as_int(values, "iogpu.wired_limit_mb"))
        if how == "macOS default":
            notes.append(
                "GPU memory limit estimated from macOS's default; "
                "raise it with `sudo sysctl iogpu.wired_limit_mb=<MiB>`"
            )
    else:
        notes.append("memory size: not reported")
    gbps = bandwidth.apple_bandwidth(chip, as_int(values, "hw.physicalcpu"))
    if gbps is None:
        notes.append("memory bandwidth: not a known chip")
    macos = values.get("kern.osproductversion")
    device = Device(
        id="apple:0",
        vendor="apple",
        name=f"{chip} GPU" if not chip.endswith("GPU") else chip,
        kind=IGPU,
        backends=("metal",),
        source="sysctl",
        total_bytes=memory,
        free_bytes=free,
        used_bytes=memory - free if memory and free is not None else None,
        unified_memory=True,
        gpu_memory_limit_bytes=limit,
        memory_bandwidth_gbps=gbps,
        bandwidth_source="table" if gbps is not None else None,
        driver_version=f"macOS {macos}" if macos else None,
        locator="apple:0",
        notes=tuple(notes),
    )
    return ProbeResult(devices=(device,), status=OK, message=chip)
