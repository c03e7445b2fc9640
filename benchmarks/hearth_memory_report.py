"""benchmarks/hearth_memory.py's report: each planned load judged against its measured peak
(issue 35's tolerance) and the memory table in markdown.
"""

from __future__ import annotations

MIB = 1024**2
GIB = 1024**3


def mib(n) -> str:
    return "-" if n is None else f"{n / MIB:,.0f}"


def measured_peak(row: dict) -> int | None:
    """The process's peak device memory for a load: NVML sampled through the run where it was
    (the issue's measure), else torch's peak reserved plus the CUDA context; rows of an older
    run (NVML read at the end only, after the prefill's buffers were returned) have neither."""
    if row.get("nvml_peak"):
        return row["nvml_peak"]
    if row.get("peak_reserved") and row.get("context"):
        return row["peak_reserved"] + row["context"]
    return None


def torch_peak(row: dict) -> int | None:
    """torch's peak reserved plus the CUDA context, printed beside NVML's peak."""
    if row.get("peak_reserved") and row.get("context"):
        return row["peak_reserved"] + row["context"]
    return None


def allocator_slack(row: dict) -> int | None:
    """torch's peak reserved less its peak allocation: the blocks its caching allocator held
    beside the live peak (a buffer made and freed again and again that took a second
    segment shows here as about its size)."""
    if row.get("peak_reserved") and row.get("peak_allocated"):
        return row["peak_reserved"] - row["peak_allocated"]
    return None


def error_fraction(predicted: int, measured: int) -> float:
    """(predicted - measured) / measured: positive is memory the plan leaves idle."""
    return (predicted - measured) / measured if measured > 0 else 0.0


def within_tolerance(predicted: int, measured: int) -> bool:
    """Issue 35's target: within max(3%, 128 MiB) of what NVML measured."""
    return abs(predicted - measured) <= max(128 * MIB, 0.03 * measured)


def experts_text(row: dict) -> str:
    """Where a row's experts were: nothing for a load all on the GPU; else the layers whose
    experts stayed in RAM, how the GPU reads them, and the pinned bytes."""
    if not row.get("ram_layers"):
        return ""
    how = f"{row['slots']} cached per layer" if row["slots"] else "read in place"
    return (
        f"experts of the last {row['ram_layers']} of {row['n_layer']} layers in RAM "
        f"({row['host_bytes'] / GIB:.1f} GiB), {how}"
    )


def markdown(item_rows: list[dict], card_rows: list[dict]) -> str:
    out = []
    if item_rows:
        out += [
            "| context | K / V | weights MiB pred / meas | KV pred / meas | decode workspace "
            "pred / meas | prefill workspace pred / meas | CUDA context pred / meas | "
            "total pred / NVML | decode tok/s |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in item_rows:
            p = r["predicted"]
            if not r["ok"]:
                out.append(f"| {r['n_ctx']:,} | {r['type_k']} / {r['type_v']} | "
                           f"failed: {r['error']} ||||||| ")  # fmt: skip
                continue
            out.append(
                f"| {r['n_ctx']:,} | {r['type_k']} / {r['type_v']} | {mib(p['weights'])} / "
                f"{mib(r['weights'])} | {mib(p['kv'])} / {mib(r['kv'])} | "
                f"{mib(p['decode_workspace'])} / {mib(r['decode_workspace'])} | "
                f"{mib(p['prefill_workspace'])} / {mib(r.get('prefill_workspace'))} | "
                f"{mib(p['context'])} / {mib(r['context'])} | {mib(p['gpu_total'])} / "
                f"{mib(r['used'])} | {r['decode_tok_s']:.1f} |"
            )
    if card_rows:
        out += [
            "",
            "| card | shape | K / V | context planned | predicted MiB | measured peak MiB "
            "(NVML) | error | within max(3%, 128 MiB) | torch peak reserved + context MiB | "
            "torch reserved beyond allocated MiB | NVML at the end MiB | CUDA context MiB | "
            "share of the card used | verified | decode tok/s |",
            "| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | "
            "---: | --- | ---: |",
        ]
        for r in card_rows:
            out.append(card_cells(r))
        out += ["", summary(card_rows)]
    return "\n".join(out)


def card_cells(r: dict) -> str:
    """One row of the memory table: judged against the measured peak (measured_peak)."""
    head = f"| {r['card_gib']:g} GiB | {r.get('shape', '')} | {r['type_k']} / {r['type_v']} |"
    if not r["n_ctx"]:
        return f"{head} nothing fits ||||||||||||"
    peak = measured_peak(r) if r.get("ok") else None
    if peak:
        error = error_fraction(r["predicted_total"], peak)
        within = "yes" if within_tolerance(r["predicted_total"], peak) else "**no**"
        figures = f"{mib(peak)} | {100 * error:+.1f}% | {within} |"
        share = f"{100 * peak / (r['card_gib'] * GIB):.1f}%"
    else:
        figures, share = f"{mib(peak)} | - | - |", "-"
    others = (
        f"{mib(torch_peak(r))} | {mib(allocator_slack(r))} | {mib(r.get('used'))} | "
        f"{mib(r.get('context'))} |"
    )
    steps = (
        "512-token prefill chunk + 8 decode steps"
        if r.get("prefill")
        else "8 decode steps (no prefill chunk)"
    )
    ok = f"yes: {steps}" if r.get("ok") else f"no: {r.get('error', 'nothing fits')}"
    speed = f"{r['decode_tok_s']:.1f}" if r.get("decode_tok_s") else "-"
    experts = f" ({experts_text(r)})" if r.get("ram_layers") else ""
    return (
        f"{head} {r['n_ctx']:,}{experts} | {mib(r.get('predicted_total'))} | {figures} {others} "
        f"{share} | {ok} | {speed} |"
    )


def summary(card_rows: list[dict]) -> str:
    """How many loads ran, how many were within the tolerance of their measured peak, the
    error's range."""
    ran = [r for r in card_rows if r.get("ok") and measured_peak(r)]
    planned = [r for r in card_rows if r["n_ctx"]]
    if not ran:
        return f"{len(planned)} loads planned, none measured."
    errors = [error_fraction(r["predicted_total"], measured_peak(r)) for r in ran]
    within = sum(within_tolerance(r["predicted_total"], measured_peak(r)) for r in ran)
    sampled = sum(bool(r.get("nvml_peak")) for r in ran)
    return (
        f"{len(ran)} of {len(planned)} planned loads ran and decoded; {within} of {len(ran)} "
        f"within max(3%, 128 MiB) of their peak ({sampled} peaks sampled by NVML, the rest "
        f"torch's peak reserved + the CUDA context); error {100 * min(errors):+.1f}% to "
        f"{100 * max(errors):+.1f}%."
    )
