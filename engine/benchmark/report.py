"""Put Hearth's figures beside llama.cpp's, with the ratios and the targets they are held to."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Comparison:
    metric: str
    hearth: float
    unit: str
    llama_cpp: float | None = None
    target: str = ""  # e.g. ">= 0.97"
    higher_is_better: bool = True

    @property
    def ratio(self) -> float | None:
        if self.llama_cpp is None or self.llama_cpp == 0:
            return None
        return self.hearth / self.llama_cpp

    @property
    def meets_target(self) -> bool | None:
        if self.ratio is None or not self.target:
            return None
        op, bound = self.target.split()
        return self.ratio >= float(bound) if op == ">=" else self.ratio <= float(bound)

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio, "meets_target": self.meets_target}


def compare(hearth: dict, llama: dict) -> list[Comparison]:
    """Rows for the figures both sides have (llama may be empty: no llama-bench here)."""
    rows = [
        Comparison("load", hearth["load_s"], "s", llama.get("load_s"), "<= 1.2", False),
        Comparison(
            "prefill", hearth["prefill_tok_s"], "tok/s", llama.get("prefill_tok_s"), ">= 0.95"
        ),
        Comparison(
            "time to first token",
            hearth["time_to_first_token_s"],
            "s",
            llama.get("prefill_s"),
            "<= 1.1",
            False,
        ),
    ]
    for key in sorted(k for k in hearth if k.startswith("decode_") and k.endswith("_tok_s")):
        label = key.removeprefix("decode_").removesuffix("_tok_s")
        name = "decode at depth" if label == "at_depth" else f"decode {label}"
        rows.append(Comparison(name, hearth[key], "tok/s", llama.get(key), ">= 0.97"))
    return rows


# The Hearth engine against llama.cpp (issue 17): decode >= 1.3x, prefill >= 0.9x, time to first
# token <= 1.1x, load <= 1.5x; decode at depth with a rot4 cache >= 1.5x llama.cpp's with f16.
ENGINE_TARGETS = {"load": "<= 1.5", "prefill": ">= 0.9", "time to first token": "<= 1.1"}
DECODE_TARGET, DEPTH_ROT4_TARGET = ">= 1.3", ">= 1.5"


def compare_engines(hearth: dict, llama: dict, hearth_kv: str = "f16") -> list[Comparison]:
    """The Hearth engine's figures beside llama.cpp's (its worker, or llama-bench), held to the
    Hearth engine's own targets."""
    if "time_to_first_token_s" in llama:  # a worker's figures: its own time to first token
        llama = {**llama, "prefill_s": llama["time_to_first_token_s"]}
    rows = []
    for row in compare(hearth, llama):
        target = ENGINE_TARGETS.get(row.metric, DECODE_TARGET)
        if row.metric == "decode at depth" and hearth_kv.startswith("rot4"):
            target = DEPTH_ROT4_TARGET
        rows.append(replace(row, target=target))
    return rows


def format_table(
    header: dict,
    rows: list[Comparison],
    extra: dict,
    names: tuple[str, str] = ("hearth", "llama.cpp"),
) -> str:
    lines = [f"{k}: {v}" for k, v in header.items()]
    lines.append("")
    lines.append(f"{'figure':22s} {names[0]:>12s} {names[1]:>12s} {'ratio':>7s}  target")
    for row in rows:
        ref = f"{row.llama_cpp:12.3f}" if row.llama_cpp is not None else f"{'-':>12s}"
        ratio = f"{row.ratio:7.3f}" if row.ratio is not None else f"{'-':>7s}"
        verdict = {True: "met", False: "MISSED", None: ""}[row.meets_target]
        target = f"{row.target} {verdict}" if row.target and row.ratio is not None else ""
        lines.append(
            f"{row.metric + ' (' + row.unit + ')':22s} {row.hearth:12.3f} {ref} {ratio}  {target}"
        )
    lines.append("")
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines)
