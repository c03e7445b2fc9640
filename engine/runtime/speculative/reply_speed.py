"""What one reply's decode would have cost without speculation, from the plain steps timed in
that same reply: the baseline of the speed-up its stats line states.

A baseline from earlier replies is stale on a machine whose speed moves (other programs, a
laptop's clocks): on the shared 2-core CPU the line said 1.32-1.66x for replies measured at
1.08-1.23x, its plain step timed while the machine was slower. So only this reply's warm plain
steps count, and a step's price has two parts:
- the level: the median of the plain steps timed nearest it, up to NEAREST before and NEAREST
  after. Where the two sides differ by more than MOVED, the machine's speed moved between them
  and the cheaper side is taken: the true cost lies between the two, so the cheaper cannot
  overstate the gain. A median, so that one slow step does not set the price of a stretch;
- the bursts: another program's bursts slow checking steps as often as plain ones, and the
  reply's time holds them, so the level is raised by how much plain steps cost on average over
  their local median (the largest one left out: a single burst among a few plain steps is no
  rate). On this CPU a median alone was 6-13% under the mean, and a reply that drafted nothing
  claimed 0.87x.
Too few plain steps and the reply states no speed-up at all.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

MIN_PLAIN = 2  # warm plain steps a reply needs before it states a speed-up
NEAREST = 3  # plain steps on each side of a step that set its level
MOVED = 1.25  # sides further apart than this: the machine's speed moved between them


@dataclass
class ReplySpeed:
    _elapsed: float = 0.0  # seconds of steps so far in this reply
    _steps: list[tuple[float, int]] = field(default_factory=list)  # (midpoint, tokens emitted)
    _plain_at: list[float] = field(default_factory=list)  # warm plain steps' midpoints, in order
    _plain_seconds: list[float] = field(default_factory=list)  # and what each took

    def step(self, seconds: float, tokens: int, *, warm_plain: bool = False) -> None:
        """A step took `seconds` and emitted `tokens`; `warm_plain`: it was a plain step that
        costs what plain decoding's does (setup.py: WARM_AFTER)."""
        midpoint = self._elapsed + seconds / 2
        self._elapsed += seconds
        self._steps.append((midpoint, tokens))
        if warm_plain:
            self._plain_at.append(midpoint)
            self._plain_seconds.append(seconds)

    @property
    def n_plain(self) -> int:
        return len(self._plain_at)

    def plain_step_seconds(self) -> float:
        """A plain step's cost for this reply's tokens: each step's tokens at the price of the
        plain steps nearest it, averaged over the tokens (0.0: fewer than MIN_PLAIN timed)."""
        if self.n_plain < MIN_PLAIN:
            return 0.0
        priced = tokens = 0.0
        for midpoint, emitted in self._steps:
            priced += emitted * self._level_at(midpoint)
            tokens += emitted
        return self._bursts() * priced / tokens if tokens else 0.0

    def _level_at(self, midpoint: float) -> float:
        split = bisect.bisect_right(self._plain_at, midpoint)  # plain steps up to this step
        before = self._plain_seconds[max(0, split - NEAREST) : split]
        after = self._plain_seconds[split : split + NEAREST]
        sides = [statistics.median(side) for side in (before, after) if side]
        if max(sides) > MOVED * min(sides):
            return min(sides)
        return statistics.median(before + after)

    def _bursts(self) -> float:
        """The mean of plain steps over their local median, the largest left out."""
        seconds = self._plain_seconds
        ratios = sorted(
            s / statistics.median(seconds[max(0, i - NEAREST) : i + NEAREST + 1])
            for i, s in enumerate(seconds)
        )
        return statistics.fmean(ratios[:-1])
