"""One snapshot of the machine: what detection found, taken once and shared.

The window takes it at start-up off the GUI thread and every page plans from it; the CLI takes
one per command. `plan_request` is the only place a PlanRequest is built from devices, so the
Library's fit badge, the Model page and `hearth plan` ask the planner the same question.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from engine.hardware import Detection, Device, detect
from engine.hardware.remote import (
    HelperBusy,
    RemoteHost,
    RemoteHostError,
    endpoint,
    parse_address,
    probe_remote,
)
from engine.hardware.remote_store import load_helpers
from engine.planner import PlanRequest, request_for_devices
from engine.planner.remote import with_helpers


@dataclass(frozen=True)
class MachineSnapshot:
    detection: Detection
    taken_at: float = field(default_factory=time.time)
    # Whether the installed engine can put layers on a GPU (the worker's Ready event says so;
    # None until known). A CPU-only build on a machine with a GPU must plan for the CPU alone.
    gpu_offload: bool | None = None
    # Helper machines (llama.cpp RPC, `hearth host`) that answered when the snapshot was taken;
    # plans may place layers on them (engine/planner/remote.py).
    helpers: tuple[RemoteHost, ...] = ()
    helper_problems: tuple[str, ...] = ()  # remembered helpers that did not answer, and why

    @property
    def devices(self) -> tuple[Device, ...]:
        return self.detection.devices

    @property
    def usable_gpus(self) -> tuple[Device, ...]:
        return () if self.gpu_offload is False else self.detection.gpus

    @property
    def has_usable_gpu(self) -> bool:
        return bool(self.usable_gpus)

    def with_gpu_offload(self, supported: bool) -> MachineSnapshot:
        return replace(self, gpu_offload=supported)

    def without_helpers(self, addresses) -> MachineSnapshot:
        """The snapshot less the helpers at `addresses` (gone mid-reply, say)."""
        gone = set(addresses)
        return replace(self, helpers=tuple(h for h in self.helpers if h.address not in gone))

    def plan_request(
        self, *, vram_budget_bytes: int | None = None, helpers: bool = False, **options
    ) -> PlanRequest:
        """The planner's question for this machine: each usable GPU's free memory less the
        safety margin (or `vram_budget_bytes`, a budget the person chose), and free RAM; with
        `helpers`, the helper machines' devices too, first, as llama.cpp orders them."""
        devices = [d for d in self.devices if not d.is_gpu or d in self.usable_gpus]
        request = request_for_devices(devices, vram_budget_bytes=vram_budget_bytes, **options)
        return with_helpers(request, self.helpers) if helpers and self.helpers else request


def snapshot_machine(
    detect_fn: Callable[[], Detection] = detect,
    *,
    gpu_offload: bool | None = None,
    helpers: tuple[RemoteHost, ...] = (),
    helper_problems: tuple[str, ...] = (),
) -> MachineSnapshot:
    """Detect now (never raises: a probe that fails leaves its devices out, and the CPU is
    always there)."""
    try:
        detection = detect_fn()
    except Exception as exc:  # detection promises not to raise; a plan on the CPU if it does
        detection = Detection(devices=(), notes=(f"Hardware detection failed: {exc}",))
    return MachineSnapshot(
        detection=detection,
        gpu_offload=gpu_offload,
        helpers=helpers,
        helper_problems=helper_problems,
    )


def probe_helpers(
    addresses: list[str] | None = None, previous: tuple[RemoteHost, ...] = ()
) -> tuple[tuple[RemoteHost, ...], tuple[str, ...]]:
    """The helpers that answer (the remembered ones, by default), and a line for each that
    does not, saying why. A helper in `previous` that is busy (serving the model this app has
    loaded on it: it serves one connection at a time) keeps its earlier figures."""
    known = {host.address: host for host in previous}
    found, problems = [], []
    for address in load_helpers() if addresses is None else addresses:
        try:
            found.append(probe_remote(address))
        except HelperBusy as exc:
            earlier = known.get(address) or known.get(endpoint(*parse_address(address)))
            if earlier is not None:
                found.append(earlier)
            else:
                problems.append(str(exc))
        except RemoteHostError as exc:
            problems.append(str(exc))
    return tuple(found), tuple(problems)
