"""Run every probe at once, each isolated, under one deadline; merge what they found.

Each probe runs on its own daemon thread. `concurrent.futures` is not used on purpose: its
worker threads are joined when the interpreter exits, so one driver call that never returns
would hang the app on quit. A probe that misses the deadline is reported as timed out and its
thread is abandoned; a probe that raises is reported as failed. Neither stops the others, and
GPUs that only the PCI bus saw still get a record that says why nothing more is known.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.hardware import (
    amd_probe,
    apple_probe,
    cpu_probe,
    nvml_probe,
    pci_scan,
    vulkan_probe,
)
from engine.hardware.host import Deadline, Host
from engine.hardware.records import (
    CPU,
    FAILED,
    OK,
    TIMED_OUT,
    CpuDetails,
    Detection,
    Device,
    ProbeReport,
    ProbeResult,
)

DEFAULT_TIMEOUT_S = 4.0

ProbeFn = Callable[[Host, Deadline], ProbeResult]

PROBES: dict[str, ProbeFn] = {
    "nvml": nvml_probe.probe,
    "amd": amd_probe.probe,
    "apple": apple_probe.probe,
    "vulkan": vulkan_probe.probe,
    "cpu": cpu_probe.probe,
}
# Which probe answers for which vendor's GPUs (to explain a GPU that only PCI saw).
VENDOR_PROBE = {"nvidia": "nvml", "amd": "amd", "intel": "vulkan"}
NATIVE_PROBES = ("nvml", "amd", "apple")
VENDOR_ORDER = {"nvidia": 0, "amd": 1, "apple": 2, "intel": 3}
KIND_ORDER = {"gpu": 0, "igpu": 1, "cpu": 2}


@dataclass
class _ProbeRun:
    name: str
    fn: ProbeFn
    done: threading.Event = field(default_factory=threading.Event)
    result: ProbeResult | None = None
    elapsed_s: float = 0.0

    def start(self, host: Host, deadline: Deadline) -> None:
        threading.Thread(
            target=self._run, args=(host, deadline), name=f"hw-probe-{self.name}", daemon=True
        ).start()

    def _run(self, host: Host, deadline: Deadline) -> None:
        began = time.perf_counter()
        try:
            self.result = self.fn(host, deadline)
        except Exception as exc:
            self.result = ProbeResult(status=FAILED, message=f"{type(exc).__name__}: {exc}")
        self.elapsed_s = time.perf_counter() - began
        self.done.set()

    def report(self, timeout_s: float) -> ProbeReport:
        if not self.done.is_set() or self.result is None:
            return ProbeReport(
                self.name, TIMED_OUT, f"did not answer within {timeout_s:.1f} s", timeout_s
            )
        r = self.result
        return ProbeReport(self.name, r.status, r.message, self.elapsed_s, len(r.devices))


def detect(
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    host: Host | None = None,
    probes: Mapping[str, ProbeFn] | None = None,
) -> Detection:
    """Everything detection found, with a report per probe. Never raises."""
    began = time.perf_counter()
    host = host or Host()
    deadline = Deadline.after(host, timeout_s)
    runs = [_ProbeRun(name, fn) for name, fn in (PROBES if probes is None else probes).items()]
    for run in runs:
        run.start(host, deadline)
    try:
        on_pci_bus = pci_scan.scan(host)
    except Exception:  # the safety net must never be the thing that fails
        on_pci_bus = []
    end = time.perf_counter() + timeout_s
    for run in runs:
        run.done.wait(max(end - time.perf_counter(), 0.0))
    reports = {run.name: run.report(timeout_s) for run in runs}
    found = {run.name: run.result.devices for run in runs if run.done.is_set() and run.result}
    devices = merge(found, reports, on_pci_bus, host)
    notes = tuple(
        f"The {r.name} probe did not answer within {timeout_s:.1f} s; what it would have found "
        "is missing or incomplete."
        for r in reports.values()
        if r.status == TIMED_OUT
    )
    return Detection(
        devices=tuple(devices),
        probes=tuple(reports.values()),
        elapsed_s=time.perf_counter() - began,
        notes=notes,
    )


def detect_devices(*, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Device]:
    """Every GPU (first) and the CPU (last). Failures are in each device's notes."""
    return list(detect(timeout_s=timeout_s).devices)


def merge(
    found: Mapping[str, tuple[Device, ...]],
    reports: Mapping[str, ProbeReport],
    on_pci_bus: list[pci_scan.PciGpu],
    host: Host | None = None,
) -> list[Device]:
    """One record per physical device: vendor probes first, then Vulkan for vendors they did not
    cover, then PCI placeholders for GPUs nobody described."""
    native = [d for name in NATIVE_PROBES for d in found.get(name, ())]
    native_vendors = {d.vendor for d in native}
    vulkan = [d for d in found.get("vulkan", ()) if d.vendor not in native_vendors]
    others = [d for name, ds in found.items() if name not in (*NATIVE_PROBES, "vulkan") for d in ds]
    devices = native + vulkan + others

    known_bus_ids = {d.pci_bus_id for d in devices if d.pci_bus_id}
    # A Vulkan record has no PCI address; it stands for one unmatched card of its vendor.
    unaddressed = {}
    for d in devices:
        if d.is_gpu and not d.pci_bus_id:
            unaddressed[d.vendor] = unaddressed.get(d.vendor, 0) + 1
    for gpu in on_pci_bus:
        if gpu.bus_id in known_bus_ids:
            continue
        if unaddressed.get(gpu.vendor, 0) > 0:
            unaddressed[gpu.vendor] -= 1
            continue
        devices.append(pci_scan.placeholder(gpu, _why_unseen(gpu.vendor, reports)))

    if not any(d.kind == CPU for d in devices):
        devices.append(_fallback_cpu(host or Host(), reports))

    def order(d: Device) -> tuple[int, int, str]:
        return (KIND_ORDER.get(d.kind, 1), VENDOR_ORDER.get(d.vendor, 9), d.pci_bus_id or d.id)

    return sorted(devices, key=order)


def _why_unseen(vendor: str, reports: Mapping[str, ProbeReport]) -> str:
    probe_name = VENDOR_PROBE.get(vendor, "")
    report = reports.get(probe_name)
    if report is None:
        return f"Seen on the PCI bus only; the {probe_name or vendor} probe did not run."
    if report.status == OK:
        return f"Seen on the PCI bus, but the {probe_name} probe did not list it."
    return f"Seen on the PCI bus only; {probe_name} probe {report.status}: {report.message}"


def _fallback_cpu(host: Host, reports: Mapping[str, ProbeReport]) -> Device:
    report = reports.get("cpu")
    why = f"cpu probe {report.status}: {report.message}" if report else "the cpu probe did not run"
    logical = os.cpu_count()
    # The memory, at least: without it a plan could not check RAM at all and would call a model
    # that fits nowhere a fit (seen when the probe timed out on a busy machine).
    total = free = None
    try:
        memory = host.load_psutil().virtual_memory()
        total, free = int(memory.total), int(memory.available)
    except Exception:
        pass
    unknown = "Memory and instruction sets" if free is None else "Instruction sets"
    return Device(
        id="cpu",
        vendor="other",
        name=platform.processor() or f"{platform.machine()} CPU",
        kind=CPU,
        backends=("cpu",),
        source="os",
        total_bytes=total,
        free_bytes=free,
        cpu=CpuDetails(None, logical),
        locator="cpu",
        notes=(f"{unknown} unknown: {why}",),
    )
