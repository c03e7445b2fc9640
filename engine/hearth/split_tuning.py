"""A split's share of a token's picks, chosen on the machine that runs it.

With a layer's experts in RAM split (engine/hearth/staged_experts.py), ggml computes c of a
token's k picks on the CPU while the copy engine brings the other k - c to the GPU; the
layer's pause lasts as long as the longer half. The planner picks c from costs fitted on one
host, but each half moves with the machine: ggml's three picks took 241-281 us a pause on one
H200 host and 331-353 on another of the same kind, the copies' start 40-80 us, and a
consumer PC's link and CPU differ far more. On one host split 4 ran 98.9 tok/s where split 3
ran 91.3 (docs/measurements/2026-11-30-s33-call-1).

So the decode graph (engine/hearth/decode_graph.py) times its step at the planned c and its
neighbours, each with the GPU's first copy issued by the copier thread or by the stepping
thread before ggml (`early_copies`, which starts the copies sooner and ggml later), a few
replays of each in turn; while the fastest is the furthest share tried it goes a share
further that way; and it keeps the fastest. The staging area has room for the most slots the
first shares use (`staging_slots`: c - 1 picks on the CPU), and the planner counts that room.

Nothing here imports torch: the planner reads staging_slots.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

ROUNDS = 5  # each setting timed this many times, the settings in turn
EARLY_COPIES = (0, 1)  # the GPU's picks the stepping thread copies itself, tried


@dataclass(frozen=True, order=True)
class SplitSetting:
    cpu_picks: int  # of a token's k picks, by ggml on the CPU
    early_copies: int = 0  # of the GPU's picks, copied by the stepping thread before ggml

    def text(self) -> str:
        by = "the stepping thread" if self.early_copies else "the copier"
        return f"{self.cpu_picks} by the CPU, the first copy by {by}"


def cpu_picks_to_try(k: int, c: int) -> list[int]:
    """The shares timed around a planned split of c of k: c - 1, c and c + 1 within 1..k-1."""
    if not 0 < c < k:
        raise ValueError(f"{c} of {k} picks on the CPU is not a split")
    return [n for n in (c - 1, c, c + 1) if 0 < n < k]


def staging_slots(k: int, c: int) -> int:
    """Device slots a split of c of k needs so that every share tried fits: k less the
    fewest picks on the CPU tried."""
    return k - min(cpu_picks_to_try(k, c))


def settings_to_try(k: int, c: int) -> list[SplitSetting]:
    return [SplitSetting(n, e) for n in cpu_picks_to_try(k, c) for e in EARLY_COPIES]


def _beyond(best: SplitSetting, tried, k: int, n_slots: int) -> list[SplitSetting]:
    """Shares one step further than any tried, where the fastest is at that edge: the
    timings fell that way (ggml's share grows while it stays the shorter half) and may fall
    further. Fewer picks on the CPU need a slot more each, as far as n_slots allows."""
    shares = {s.cpu_picks for s in tried}
    n = best.cpu_picks
    further = []
    if n == max(shares) and n + 1 < k:
        further.append(n + 1)
    if n == min(shares) and n > 1 and k - (n - 1) <= n_slots:
        further.append(n - 1)
    return [SplitSetting(m, e) for m in further for e in EARLY_COPIES]


@dataclass(frozen=True)
class SplitTuning:
    """What the decode graph measured: seconds a step of each setting, round by round."""

    planned: SplitSetting
    chosen: SplitSetting
    seconds: dict[SplitSetting, list[float]]
    took_s: float = 0.0  # the whole tuning's time, captures included (set by its caller)

    def median_ms(self, setting: SplitSetting) -> float:
        return statistics.median(self.seconds[setting]) * 1e3

    def text(self) -> str:
        rows = ", ".join(
            f"{s.cpu_picks}{'e' if s.early_copies else ''} {self.median_ms(s):.2f}"
            for s in sorted(self.seconds)
        )
        took = f", tuned in {self.took_s:.1f} s" if self.took_s else ""
        return (
            f"experts in RAM: {self.chosen.text()} (planned {self.planned.cpu_picks}{took}); "
            f"ms a step by setting ('e': the first copy by the stepping thread): {rows}"
        )


def tune(
    planned: SplitSetting,
    k: int,
    n_slots: int,
    step_seconds: Callable[[SplitSetting], float],
    rounds: int = ROUNDS,
) -> SplitTuning:
    """The fastest setting by the medians of step_seconds: first the planned share and its
    neighbours that fit n_slots, each with the first copy by either thread, timed in turn
    `rounds` times; then, while the fastest is the furthest share tried, the next share out
    beside it (timed again with them, so that both see the same minutes of the machine).
    The planned setting wins a tie."""
    first = [s for s in settings_to_try(k, planned.cpu_picks) if k - s.cpu_picks <= n_slots]
    if planned not in first:
        raise ValueError(f"the planned setting {planned} does not fit {n_slots} slots")
    seconds: dict[SplitSetting, list[float]] = {}

    def fastest() -> SplitSetting:
        return min(seconds, key=lambda s: (statistics.median(seconds[s]), s != planned))

    batch = first
    while batch:
        for _ in range(rounds):
            for setting in batch:
                seconds.setdefault(setting, []).append(step_seconds(setting))
        best = fastest()
        further = _beyond(best, seconds, k, n_slots)
        batch = [best, *further] if further else []
    return SplitTuning(planned, fastest(), seconds)
