"""How many tokens to draft next: the length that buys the most tokens per second, from the
recent acceptance rate and the measured cost of checking drafts.

A step that checks k drafts, each kept with probability a (until the first miss), emits
(1 - a^(k+1)) / (1 - a) tokens on average and costs 1 + c*k plain steps, where c is what one more
checked token adds. On a GPU, batch-1 decode reads all the weights for one token and c is a few
percent, so long drafts pay; on a CPU the arithmetic grows with every token (c near 0.7 for the
starter model here) and only well-kept drafts pay. Costs are not linear (llama.cpp changes kernels
with the batch size, and the cost per draft falls with the length), so a length that has been
checked is priced at its own measured cost, and a straight line through the cheapest measured
cost per draft prices only lengths not tried yet. Those costs are of checks inside a run of
checks; going from plain steps to checks and back costs more (llama.cpp builds its graph again
for each new batch shape: on a GPU over a plain step for a small model), and a run pays that
once, so a check that would start a run is charged the switch's share of a run (setup.py
measures both). Charging the whole switch to every check instead priced the
one-draft probes at 2.8 steps on the H100 and kept the starter model's drafting paused at 100%
of its drafts kept (rewrite 0.96x). When no length is expected to beat a plain
step, nothing is drafted for a pause that doubles until drafting pays again (1, 2, 4, ... up to
`max_pause` steps, longer where a probe is dear) and ends with a probe of one draft - so text the
drafter cannot guess, or checking too dear to pay, costs little more than plain decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PROBE_SHARE = 0.03  # the most that probes which keep nothing may add to paused decoding
# The most a reply's first probe may add to the steps paused before it. With the pause starting
# at one step, a GPU's dear probes (a switch of shape on a small model: 3-4 plain steps each)
# came at steps 1, 3, 7, 15 ... of every reply: the starter model's 86-token answers ran at
# 0.83x on the H100. A CPU's probes cost about a step more than a plain one.
FIRST_PROBE_SHARE = 0.25


def expected_tokens(accept: float, k: int) -> float:
    """Tokens a step emits on average with k drafts kept with probability `accept` each."""
    if accept >= 1.0:
        return k + 1.0
    return (1.0 - accept ** (k + 1)) / (1.0 - accept)


def best_length(
    accept: float,
    cost: float,
    max_length: int,
    measured: dict[int, float] | None = None,
    lengths: tuple[int, ...] = (),
    extra: float = 0.0,
    current: int = 0,
) -> tuple[int, float]:
    """The draft length with the most tokens per unit of time, and that gain over a plain step
    (1.0: no better). A length in `measured` costs that many plain steps; others 1 + cost*k;
    every one but `current` (the batch shape in use) `extra` more (a change of shape).
    `lengths`: the only lengths to consider (empty: every one from 1 to `max_length`)."""
    measured = measured or {}
    best_k, best_gain = 0, 1.0
    for k in lengths or range(1, max_length + 1):
        if k > max_length:
            continue
        price = measured.get(k, 1.0 + cost * k) + (0.0 if k == current else extra)
        gain = expected_tokens(accept, k) / price
        if gain > best_gain:
            best_k, best_gain = k, gain
    return best_k, best_gain


def fixed_shape_lengths(max_length: int) -> tuple[int, ...]:
    """Draft lengths whose checking batches are powers of two (1, 3, 7, 15, ... drafts after
    the last token), up to `max_length`. On a GPU every new batch size makes llama.cpp build
    its graph again and capture another CUDA graph (about a millisecond each time, docs/
    speculative.md): with a few fixed sizes, drafts padded up to them, checking steps in a
    row reuse one graph."""
    lengths, width = [], 2
    while width - 1 <= max_length:
        lengths.append(width - 1)
        width *= 2
    return tuple(lengths) or (max_length,)


@dataclass
class DraftLength:
    max_length: int = 16
    # the only lengths drafted (fixed_shape_lengths on a GPU; empty: any from 1 to max_length)
    lengths: tuple[int, ...] = ()
    max_pause: int = 32
    window: int = 8  # steps the acceptance rate is taken over
    cost: float = 0.3  # a first guess until a checking step has been timed against a plain one
    # What going from plain steps to checking steps and back costs, in plain steps, on top of
    # the checks themselves (llama.cpp builds its graph again at each change of batch shape:
    # about 0.05 steps on this CPU, 0.7 on an 8B and 1.7 on the starter model on the H100).
    # A run of checks pays it once, so a check that starts a run is charged its share.
    switch: float = 0.5  # a first guess until a run of checks has been timed
    run_steps: float = 4.0  # checks in a run, a running mean (the switch's share is 1/run_steps)
    # the drafts of the check just before this step (set by setup.py; 0: that was a plain step)
    run_length: int = 0
    _empty_checks: int = 0  # checks in a row, in this run, with nothing proposed (all padding)
    _steps: list[tuple[int, int]] = field(default_factory=list)  # (kept, missed) per step
    # drafts -> cost in plain steps of a check inside a run (no switch in it)
    _measured: dict[int, float] = field(default_factory=dict)
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
        # Leaving plain steps costs the switch's share of a run; inside a run, another batch
        # shape costs a graph build again (about half a switch); the shape in use costs nothing.
        share = (0.5 if self.in_run else 1.0) * self.switch / self.run_steps
        k, _gain = best_length(
            self.acceptance,
            self.cost,
            self.max_length,
            self._measured,
            self.lengths,
            share,
            self.run_length,
        )
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

    @property
    def in_run(self) -> bool:
        """Whether the step before this one was a check."""
        return self.run_length > 0

    def pad_empty_check(self, length: int) -> bool:
        """Whether a check of `length` drafts, all padding (the drafter proposed nothing),
        should keep the run's batch shape instead of a plain step: while such checks, in a
        row, cost less than leaving the run and coming back (the switch). On a GPU with a
        small model a switch costs several plain steps and a check little more than one; on a
        CPU the opposite, and this is never true there."""
        if not self.in_run or length != self.run_length:
            return False
        over_plain = self.steady_cost(length) - 1.0
        if over_plain <= 0 or (self._empty_checks + 1) * over_plain > self.switch:
            return False
        self._empty_checks += 1
        return True

    def proposed(self) -> None:
        """The drafter proposed something: empty checks in a row start again from none."""
        self._empty_checks = 0

    def steady_cost(self, drafted: int) -> float:
        """What a check of `drafted` drafts inside a run costs, in plain steps: measured, or
        from the line through the cheapest measured cost per draft."""
        return self._measured.get(drafted, 1.0 + self.cost * drafted)

    def record_run(self, checks: int, switch_steps: float) -> None:
        """A run of `checks` checking steps ended, its switches from plain steps and back
        having cost `switch_steps` plain steps beyond the checks."""
        if checks <= 0:
            return
        self.switch = 0.7 * self.switch + 0.3 * max(0.0, switch_steps)
        self.run_steps = max(1.0, 0.7 * self.run_steps + 0.3 * checks)

    def record_cost(self, drafted: int, seconds: float, plain_seconds: float) -> None:
        """A checking step of `drafted` drafts inside a run took `seconds`; a plain step
        `plain_seconds`."""
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
        shortest = math.ceil(self._probe_over_plain() / FIRST_PROBE_SHARE)
        self._pause = min(self._longest_pause(), max(1, shortest, self._pause * 2))
        self._paused_for = self._pause

    def _probe_over_plain(self) -> float:
        """What a probe (one draft, from plain steps and back) costs over a plain step."""
        return max(0.0, self.steady_cost(1) + self.switch - 1.0)

    def _longest_pause(self) -> int:
        """`max_pause` steps, or more where a probe costs more: a probe that keeps nothing then
        costs at most PROBE_SHARE of the steps paused before it (on a GPU a probe between plain
        steps also pays for llama.cpp building its graph twice: several steps for a small model)."""
        return max(self.max_pause, math.ceil(self._probe_over_plain() / PROBE_SHARE))
