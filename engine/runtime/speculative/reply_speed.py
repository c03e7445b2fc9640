"""What one reply's decode would have cost without speculation, from the plain steps timed in
that same reply: the baseline of the speed-up its stats line states.

A baseline from earlier replies is stale on a machine whose speed moves (other programs, a
laptop's clocks): on the shared 2-core CPU the line said 1.32-1.66x for replies measured at
1.08-1.23x, its plain step timed while the machine was slower. So only this reply's warm plain
steps count, and each step of the reply is priced at the plain steps timed nearest it in time:
the cheaper of those just before and those just after. Where the machine's speed drifts between
two measurements, the true cost lies between them and the cheaper one cannot overstate the gain;
with none after (the reply's last stretch), those before it price it. Too few plain steps and
the reply states no speed-up at all.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

MIN_PLAIN = 2  # warm plain steps a reply needs before it states a speed-up
NEAREST = 3  # plain steps on each side of a step that price it (their median: one slow step,
# another program's burst, must not set the price)


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
            priced += emitted * self._price_at(midpoint)
            tokens += emitted
        return priced / tokens if tokens else 0.0

    def _price_at(self, midpoint: float) -> float:
        split = bisect.bisect_right(self._plain_at, midpoint)  # plain steps up to this step
        before = self._plain_seconds[max(0, split - NEAREST) : split]
        after = self._plain_seconds[split : split + NEAREST]
        return min(statistics.median(side) for side in (before, after) if side)
