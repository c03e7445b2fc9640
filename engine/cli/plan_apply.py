"""`hearth plan --load`: load a model the way its plan says, in the engine worker, and put what
llama.cpp really allocated (the buffer sizes it logs) and the device memory delta beside the
plan's prediction."""

from __future__ import annotations

from collections import defaultdict
from typing import TextIO

from engine.planner import Plan
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue
from engine.runtime.engine_output import crash_report
from engine.untrusted_text import printable_line

MIB = 1024 * 1024
LOAD_TIMEOUT_S = 900.0


def load_and_report(plan: Plan, out: TextIO) -> int:
    assert plan.settings is not None
    events = EventQueue()
    client = EngineClient(events)
    client.start()
    try:
        client.load(plan.settings.model_params())
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=LOAD_TIMEOUT_S)
    finally:
        client.close()
    if isinstance(loaded, EngineCrashed):
        message = f"The load crashed the engine: {loaded.message}"
        out.write(f"\n{crash_report(message, loaded.cause_lines, loaded.last_lines, 10)}\n")
        return 1
    if isinstance(loaded, p.LoadFailed):
        out.write(f"\nThe load failed: {printable_line(loaded.message)}\n")
        for line in loaded.details:
            out.write(f"  ! {line}\n")
        return 1
    write_allocations(loaded, plan, out)
    return 0


def write_allocations(loaded: p.ModelLoaded, plan: Plan, out: TextIO) -> None:
    by_device: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for allocation in loaded.allocations:
        by_device[allocation.device][allocation.kind] += allocation.bytes
    out.write(f"\nloaded in {loaded.load_seconds:.2f} s; llama.cpp allocated (MiB):\n")
    out.write(f"  {'buffer':14s} {'model':>9s} {'KV':>9s} {'compute':>9s} {'output':>9s}\n")
    for device, kinds in sorted(by_device.items()):
        cells = " ".join(
            f"{kinds.get(k, 0) / MIB:9.1f}" for k in ("model", "KV", "compute", "output")
        )
        out.write(f"  {device:14s} {cells}\n")
    if loaded.tensors_in_ram:
        out.write(f"  {len(loaded.tensors_in_ram)} tensors kept in RAM by the plan\n")
    for delta in loaded.device_used_delta:
        out.write(
            f"  {delta.device}: device memory in use grew by {delta.used_bytes / MIB:.1f} MiB\n"
        )
    out.write("predicted (MiB):\n")
    for d in plan.devices:
        out.write(
            f"  {d.name[:14]:14s} total {d.total_bytes / MIB:9.1f} "
            f"(weights {d.weights_bytes / MIB:.1f}, KV {d.kv_bytes / MIB:.1f}, "
            f"compute {d.compute_bytes / MIB:.1f}, overhead {d.overhead_bytes / MIB:.1f})\n"
        )
