"""After a load: the plan's memory beside what the engine measured, in one line for the Model page
and `hearth chat`.

    memory_check_text(plan.devices, loaded)
      -> "GPU memory: predicted 5.21 GiB, measured 5.02 GiB (-3.6%, within the plan's
          tolerance)"
      -> "System RAM: predicted 0.21 GiB; not measured on the CPU (the engine process grew by
          0.18 GiB, which counts mapped weights only as they are read)"

Measured on a GPU: the device's used memory after the load less before it (the driver's own
figure, cudaMemGetInfo / NVML: every allocation of the engine process, the CUDA context
included; also any other program's growth meanwhile). With the weights kept from an earlier
load, "before" is before those weights were loaded, so it is the whole model either way.
On the CPU no figure compares with the plan: the weights are mapped from the file and count in
the resident memory only as pages are read, so the process's growth is given for what it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.planner.records import DeviceUsage
from engine.runtime import protocol as p
from engine.units import format_bytes

HOST_ID = "host"  # the planner's id for system RAM (engine/planner/explain.py)
TOLERANCE_FRACTION = 0.03  # issue 35's target: within max(3%, 128 MiB)
TOLERANCE_BYTES = 128 * 1024 * 1024


def within_tolerance(predicted: int, measured: int) -> bool:
    return abs(measured - predicted) <= max(TOLERANCE_BYTES, TOLERANCE_FRACTION * measured)


def memory_check_text(devices: Sequence[DeviceUsage], loaded: p.ModelLoaded) -> str:
    """One line: the plan's GPU memory against the device's measured growth, or, on the CPU,
    the plan's RAM and why it is not measured. '' when the plan says nothing."""
    gpus = [d for d in devices if d.id != HOST_ID and d.total_bytes > 0]
    measured = [delta.used_bytes for delta in loaded.device_used_delta]
    if gpus and measured:
        predicted, used = sum(d.total_bytes for d in gpus), sum(measured)
        error = (predicted - used) / used * 100 if used > 0 else 0.0
        verdict = (
            "within the plan's tolerance"
            if within_tolerance(predicted, used)
            else "outside the plan's tolerance of 3% or 128 MiB"
        )
        return (
            f"GPU memory: predicted {format_bytes(predicted, 2)}, measured "
            f"{format_bytes(used, 2)} ({error:+.1f}%, {verdict})"
        )
    if gpus:
        return (
            f"GPU memory: predicted {format_bytes(sum(d.total_bytes for d in gpus), 2)}; not "
            "measured (the driver did not report the device's memory)"
        )
    host = [d for d in devices if d.id == HOST_ID]
    if not host:
        return ""
    grew = loaded.process_rss_delta
    growth = (
        f" (the engine process grew by {format_bytes(grew, 2)}, which counts mapped weights "
        "only as they are read)"
        if grew > 0
        else ""
    )
    return (
        f"System RAM: predicted {format_bytes(host[0].total_bytes, 2)}; not measured on the "
        f"CPU{growth}"
    )
