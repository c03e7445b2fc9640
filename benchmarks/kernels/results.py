"""The one results schema every kernel benchmark writes (Liger-Kernel's shape): a row per
(op, shape, format, provider, metric), so that one table, one JSON file and one comparison
serve every op. No torch here: reading and printing results works anywhere.

    op        the public kernel op (quant_matmul, decode_attention, rms_norm, ...)
    shape     its problem size as text ("4096x14336 rows=1", "32k positions", "4096")
    format    the data's format or dtype (Q4_K, rot4/rot4, f16)
    provider  who computed it: "hearth" (kernels/), or a baseline ("torch", "cublas")
    metric    what was measured (time, bandwidth, of_copy)
    value     the figure
    unit      its unit (us, GB/s, fraction)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Row:
    op: str
    shape: str
    format: str
    provider: str
    metric: str
    value: float
    unit: str


def timed_rows(op: str, shape: str, fmt: str, provider: str, seconds: float,
               moved_bytes: int | None = None,
               copy_bw: float | None = None) -> list[Row]:  # fmt: skip
    """A timed call as rows: its time in µs and, given the bytes it must move, the bandwidth
    that makes and its fraction of the device's copy bandwidth (the roofline of a decode op)."""
    rows = [Row(op, shape, fmt, provider, "time", seconds * 1e6, "us")]
    if moved_bytes is not None:
        rate = moved_bytes / seconds
        rows.append(Row(op, shape, fmt, provider, "bandwidth", rate / 1e9, "GB/s"))
        if copy_bw:
            rows.append(Row(op, shape, fmt, provider, "of_copy", rate / copy_bw, "fraction"))
    return rows


def write_json(rows: list[Row], path: str | Path, **context: object) -> None:
    """rows (and what the run was on: device, copy bandwidth) as one JSON object."""
    Path(path).write_text(json.dumps({**context, "rows": [asdict(r) for r in rows]}, indent=1))


def read_json(path: str | Path) -> list[Row]:
    return [Row(**r) for r in json.loads(Path(path).read_text())["rows"]]


def table(rows: list[Row]) -> str:
    """The rows as a text table, one line per (op, shape, format, provider), metrics as
    columns in the order first met."""
    metrics: list[tuple[str, str]] = []
    lines: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for r in rows:
        if (r.metric, r.unit) not in metrics:
            metrics.append((r.metric, r.unit))
        lines.setdefault((r.op, r.shape, r.format, r.provider), {})[r.metric] = r.value
    head = f"{'op':20} {'shape':24} {'format':12} {'provider':22}"
    head += "".join(f" {f'{m} ({u})':>16}" for m, u in metrics)
    out = [head]
    for (op, shape, fmt, provider), values in lines.items():
        cells = "".join(
            f" {values[m]:16.{1 if u != 'fraction' else 3}f}" if m in values else f" {'':16}"
            for m, u in metrics
        )
        out.append(f"{op:20} {shape:24} {fmt:12} {provider:22}{cells}")
    return "\n".join(out)
