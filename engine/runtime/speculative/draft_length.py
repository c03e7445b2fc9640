"""How many tokens to draft next: the length that buys the most tokens per second, from the
recent acceptance rate and the measured cost of checking drafts.

A step that checks k drafts, each kept with probability a (until the first miss), emits
(1 - a^(k+1)) / (1 - a) tokens on average and costs 1 + c*k plain steps, where c is what one more
checked token adds. On a GPU, batch-1 decode reads all the weights for one token and c is a few
percent, so long drafts pay; on a CPU the arithmetic grows with every token (c near 0.7 for the
starter model here) and only well-kept drafts pay. Costs are not linear (llama.cpp changes kernels
with the batch size, and the cost per draft falls with the length), so a length that has been
checked is priced at its own measured cost, and a straight line through the cheapest measured
cost per draft prices only lengths not tried yet. A checking step's price includes the plain
steps after it paying for the switch back (setup.py). When no length is expected to beat a plain
step, nothing is drafted for a pause that doubles until drafting pays again (1, 2, 4, ... up to
`max_pause` steps, longer where a probe is dear) and ends with a probe of one draft - so text the
drafter cannot guess, or checking too dear to pay, costs little more than plain decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PROBE_SHARE = 0.03  # the most that probes which keep nothing may add to paused decoding


def expected_tokens(accept: float, k: int) -> float:
    """Tokens a step emits on average with k drafts kept with probability `accept` each."""
    if accept >= 1.0:
        return k + 1.0
    return (1.0 - accept ** (k + 1)) / (1.0 - accept)


def best_length(
    accept: float, cost: float, max_length: int, measured: dict[int, float] | None = None
) -> tuple[int, float]:
    """The draft length with the most tokens per unit of time, and that gain over a plain step
    (1.0: no better). A length in `measured` costs that many plain steps; others 1 + cost*k."""
    measured = measured or {}
    best_k, best_gain = 0, 1.0
    for k in range(1, max_length + 1):
        gain = expected_tokens(accept, k) / measured.get(k, 1.0 + cost * k)
        if gain > best_gain:
            best_k, best_gain = k, gain
    return best_k, best_gain


@dataclass
class DraftLength:
    max_length: int = 16
    max_pause: int = 32
    window: int = 8  # steps the acceptance rate is taken over
    cost: float = 0.3  # a first guess until a checking step has been timed against a plain one
    _steps: list[tuple[int, int]] = field(default_factory=list)  # (kept, missed) per step
    _measured: dict[int, float] = field(default_factory=dict)  # drafts -> cost in plain steps
    _pause: int = 0
    _paused_for: int = 0

    @property
    def acceptance(self) -> float:
        """The chance that a draft is kept, given those before it were: kept / (kept + misses)
        over the recent steps, with one of each assumed (no step yet: one half)."""
        kept = sum(k for k, _ in self._steps)
        missed = sum(m for _, m in self._steps)
        return (kept + 1.0) / (kept + missed + 2.0)

    def next_length(self) -> int:
        """Tokens to draft in this step (0: a plain step)."""
        if self._paused_for > 0:
            self._paused_for -= 1
            return 0 if self._paused_for > 0 else 1  # the pause ends with a probe
        k, _gain = best_length(self.acceptance, self.cost, self.max_length, self._measured)
        if k == 0:
            self._start_pause()
        else:
            self._pause = 0  # drafting pays again: the next pause starts short
        return k

    def new_reply(self) -> None:
        """A reply starts: no pause carried over from the last one. A pause that had doubled to
        32 steps or more (longer where a probe is dear) let a short reply end before it drafted
        at all; now a reply whose first length does not pay probes after one step. The recent
        acceptance stays (the window is 8 steps: the new text soon fills it), and so do the
        measured costs: they are the machine's, not the text's."""
        self._pause = self._paused_for = 0

    def record(self, drafted: int, accepted: int) -> None:
        """A checking step kept `accepted` of `drafted` drafts."""
        if drafted <= 0:
            return
        self._steps = [*self._steps, (accepted, int(accepted < drafted))][-self.window :]
        # A kept draft does not end the doubling by itself: a probe can be kept and drafting
        # still not pay (its price is what decides, next_length), and a pause of one step
        # after each kept probe made every other step a probe.
        if accepted == 0:
            self._start_pause()

    def record_cost(self, drafted: int, seconds: float, plain_seconds: float) -> None:
        """A checking step of `drafted` drafts took `seconds`; a plain step `plain_seconds`."""
        if drafted <= 0 or plain_seconds <= 0:
            return
        steps = seconds / plain_seconds
        known = self._measured.get(drafted)
        self._measured[drafted] = steps if known is None else 0.8 * known + 0.2 * steps
        # A checking step's cost grows less than linearly with its drafts (per draft, 15 cost
        # less than 1 on this CPU and on the H100), so lengths not tried yet are priced on the
        # line through the cheapest measured cost per draft. A mean over the steps taken, most
        # of them one-draft probes after pauses, priced long drafts out before they were ever
        # tried (on this CPU: 1.03 steps a draft, stuck at one draft, rewrite 1.05x -> 0.99x).
        self.cost = max(0.0, min((m - 1.0) / k for k, m in self._measured.items()))

    def _start_pause(self) -> None:
        self._pause = min(self._longest_pause(), max(1, self._pause * 2))
        self._paused_for = self._pause

    def _longest_pause(self) -> int:
        """`max_pause` steps, or more where a probe costs more: a probe that keeps nothing then
        costs at most PROBE_SHARE of the steps paused before it (on a GPU a probe between plain
        steps also pays for llama.cpp building its graph twice: several steps for a small model)."""
        probe = self._measured.get(1, 1.0 + self.cost)
        return max(self.max_pause, math.ceil((probe - 1.0) / PROBE_SHARE))
