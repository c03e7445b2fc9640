"""`hearth hw [--json] [--no-engine] [--host ADDR ...]`: the GPUs, the CPU and what the installed
engine can use; with --host, the devices of helper machines (`hearth host`) beside them, with
the measured link to each."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from engine.cli import numbers, remote_cmd
from engine.hardware import (
    DEFAULT_TIMEOUT_S,
    Detection,
    DeviceStatus,
    EngineView,
    detect,
    probe_engine_devices,
    reconcile,
)
from engine.hardware.engine_view import DEFAULT_PROBE_TIMEOUT_S
from engine.hardware.records import TIMED_OUT
from engine.hardware.summary import bandwidth_phrase, detail_phrases, engine_phrase, memory_phrase


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--no-engine",
        action="store_true",
        help="do not ask the installed llama.cpp which devices it can use",
    )
    parser.add_argument(
        "--timeout",
        type=numbers.float_in_range(0.1, 3600),
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds the driver probes may take (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="ADDR",
        help="a helper machine running `hearth host` (HOST or HOST:PORT); repeat for several",
    )
    parser.add_argument(
        "--remember",
        action="store_true",
        help="keep the --host helpers for planning and loading (the Hardware page lists them)",
    )


def run(args: argparse.Namespace) -> int:
    detection = detect(timeout_s=args.timeout)
    view = None if args.no_engine else probe_engine_devices(timeout_s=DEFAULT_PROBE_TIMEOUT_S)
    statuses = reconcile(list(detection.devices), view) if view is not None else None
    helpers = remote_cmd.probe_helpers(args.host)
    if args.json:
        data = to_json(detection, view, statuses)
        data["helpers"] = remote_cmd.helpers_json(helpers)
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(detection, view, statuses, sys.stdout)
        remote_cmd.print_helpers(helpers, sys.stdout)
    if args.remember and args.host:
        remote_cmd.remember([address for address, found in helpers if not isinstance(found, str)])
    return 1 if any(isinstance(found, str) for _, found in helpers) else 0


def to_json(
    detection: Detection, view: EngineView | None, statuses: list[DeviceStatus] | None
) -> dict[str, object]:
    return {
        "devices": [d.to_dict() for d in detection.devices],
        "probes": [p.to_dict() for p in detection.probes],
        "detection_seconds": round(detection.elapsed_s, 4),
        "notes": list(detection.notes),
        "engine": None if view is None else view.to_dict(),
        "engine_status": None if statuses is None else [s.to_dict() for s in statuses],
    }


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def print_table(
    detection: Detection,
    view: EngineView | None,
    statuses: list[DeviceStatus] | None,
    out: TextIO,
) -> None:
    by_id = {s.device.id: s for s in statuses or []}
    devices = list(detection.devices)
    devices += [s.device for s in statuses or [] if s.device.id not in {d.id for d in devices}]
    header = ["DEVICE", "KIND", "MEMORY", "BANDWIDTH", "BACKENDS", "ENGINE"]
    rows = []
    for device in devices:
        status = by_id.get(device.id)
        rows.append(
            [
                device.name,
                device.kind,
                memory_phrase(device, *_engine_memory(status)),
                bandwidth_phrase(device),
                ", ".join(device.backends),
                _engine_cell(status),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.write(f"Hardware (detected in {detection.elapsed_s * 1000:.0f} ms)\n\n")
    out.write(_row(header, widths) + "\n")
    for row in rows:
        out.write(_row(row, widths) + "\n")
    for device in devices:
        out.write(f"\n{device.name}\n  {' · '.join(detail_phrases(device))}\n")
        status = by_id.get(device.id)
        if status is not None and (status.hint is not None or status.usable is False):
            out.write(f"  ! {status.message}\n")
            if status.hint is not None:
                out.write(f"    CMake flags: {status.hint.cmake_env}\n")
        for note in device.notes:
            out.write(f"  note: {note}\n")
    out.write("\n")
    if view is not None:
        out.write(engine_phrase(view) + "\n")
    for note in detection.notes:
        out.write(f"note: {note}\n")
    out.write("Probes:\n")
    name_width = max((len(p.name) for p in detection.probes), default=0)
    for p in detection.probes:
        took = f" ({p.elapsed_s * 1000:.0f} ms)" if p.status != TIMED_OUT else ""
        out.write(f"  {p.name.ljust(name_width)}  {p.status}{took}: {p.message}\n")


def _engine_memory(status: DeviceStatus | None) -> tuple[int | None, int | None]:
    if status is None:
        return None, None
    return status.free_bytes, status.total_bytes


def _engine_cell(status: DeviceStatus | None) -> str:
    if status is None:
        return "-"
    if status.usable is None:
        return "?"
    if not status.usable:
        return f"no - install {status.hint.backend} build" if status.hint else "no"
    return status.engine_device.name if status.engine_device else "yes"
