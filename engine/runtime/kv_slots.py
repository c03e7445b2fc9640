"""Which sequence of the shared KV cache a new generation gets, and whether it fits yet.

With several sequences in one llama.cpp context (engine/runtime/batched_decode.py) the KV cache
is one pool of `n_cells` cells. Each sequence ("slot") remembers the tokens it holds, also after
its generation ended, so that a prompt starting the same way (the next turn of a chat, the same
system prompt from another client) computes only what is new:

- the prompt's longest common prefix with any slot is found;
- if that slot is idle, the new generation takes it over and drops only the part that differs;
- otherwise an idle slot is cleared and given the prefix by `llama_memory_seq_cp`, which in a
  unified cache shares the cells instead of copying them.

A generation is admitted only when its prompt and its `max_tokens` fit in the cells no other
generation holds or has reserved; idle slots give back their cells (least recently used first)
to make room. Pure bookkeeping, no llama.cpp: the decoder applies the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Slot:
    seq: int
    cached: list[int] = field(default_factory=list)  # tokens whose KV this sequence holds
    borrowed: int = 0  # leading cells shared from another slot (counted there, not here)
    lenders: set[int] = field(default_factory=set)  # slots whose cells this one shares
    busy: bool = False
    reserved: int = 0  # cells the running generation may still fill
    last_used: int = 0

    @property
    def own_cells(self) -> int:
        return len(self.cached) - self.borrowed


@dataclass(frozen=True)
class Admission:
    slot: Slot  # the slot the generation runs in
    reuse: int  # prompt tokens already in the cache: slot.cached[:reuse] after the plan
    source: Slot | None  # a different slot to share those tokens from, or None
    evict: tuple[Slot, ...]  # idle slots to clear first, to make room


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class SlotTable:
    def __init__(self, n_slots: int, n_cells: int):
        self.slots = [Slot(seq=i) for i in range(n_slots)]
        self.n_cells = n_cells
        self._clock = 0

    def cells_committed(self) -> int:
        """Cells held by any slot plus those reserved by running generations."""
        return sum(s.own_cells + s.reserved for s in self.slots)

    def plan(self, prompt: list[int], max_new: int) -> Admission | None:
        """Where a generation of `max_new` tokens after `prompt` can run now; None: not yet
        (no idle slot, or no room until a running generation ends)."""
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return None
        # At least one prompt token must be computed, for logits to sample from.
        limit = len(prompt) - 1
        scored = [(min(common_prefix(s.cached, prompt), limit), s) for s in self.slots]
        best, source = max(scored, key=lambda pair: (pair[0], not pair[1].busy))
        if best <= 0:
            source = None
        if source is not None and not source.busy:
            slot, source = source, None  # take the matching idle slot over
        else:
            slot = min(idle, key=lambda s: (len(s.cached) > 0, s.last_used))
        need = len(prompt) - best + max_new
        freed = slot.own_cells - (max(0, best - slot.borrowed) if source is None else 0)
        free = self.n_cells - self.cells_committed() + freed
        evict: list[Slot] = []
        for other in sorted(idle, key=lambda s: s.last_used):
            if free >= need:
                break
            if other is slot or other is source or other.own_cells == 0:
                continue
            evict.append(other)
            free += other.own_cells
        if free < need:
            return None
        return Admission(slot=slot, reuse=max(best, 0), source=source, evict=tuple(evict))

    def prefix_in_progress(self, prompt: list[int], prompts: dict[int, list[int]]) -> bool:
        """Whether a running generation's prompt (`prompts`: by sequence) shares more with
        `prompt` than its sequence has computed yet: waiting a step then lets the new prompt
        borrow those cells instead of computing them again (clients that start together with
        the same system prompt)."""
        limit = len(prompt) - 1
        have = max((min(common_prefix(s.cached, prompt), limit) for s in self.slots), default=0)
        for slot in self.slots:
            if slot.busy and slot.seq in prompts:
                coming = min(common_prefix(prompts[slot.seq], prompt), limit)
                if coming > have and coming > len(slot.cached):
                    return True
        return False

    def apply(self, admission: Admission, prompt: list[int], max_new: int) -> None:
        """Record the plan as carried out (the decoder has changed the cache accordingly)."""
        for other in admission.evict:
            self.truncate(other, 0)
        slot, n = admission.slot, admission.reuse
        if admission.source is None:
            self.truncate(slot, n)
        else:
            self.truncate(slot, 0)
            slot.cached = list(prompt[:n])
            slot.borrowed = n
            slot.lenders = {admission.source.seq} | admission.source.lenders
        slot.busy = True
        slot.reserved = len(prompt) - n + max_new
        self.touch(slot)

    def truncate(self, slot: Slot, n: int) -> None:
        """`slot` keeps only its first n tokens; slots sharing its later cells now own them."""
        del slot.cached[n:]
        slot.borrowed = min(slot.borrowed, n)
        if slot.borrowed == 0:
            slot.lenders = set()
        for other in self.slots:
            if slot.seq in other.lenders and other.borrowed > n:
                other.borrowed = n
                if n == 0:
                    other.lenders = set()

    def grow(self, slot: Slot, tokens: list[int]) -> None:
        """Tokens were decoded into `slot`: they move from its reservation to its cells."""
        slot.cached.extend(tokens)
        slot.reserved = max(0, slot.reserved - len(tokens))

    def release(self, slot: Slot) -> None:
        """The generation in `slot` ended; its cells stay, for a prompt that continues them."""
        slot.busy = False
        slot.reserved = 0
        self.touch(slot)

    def touch(self, slot: Slot) -> None:
        self._clock += 1
        slot.last_used = self._clock
