"""Which KV pages each sequence of a batch holds: the page accounting of the multi-sequence cache.

One pool of `n_pages` pages of `page_size` positions is shared by up to `max_sequences`
sequences. Each sequence has its own page table (its pages in position order) and length.
Pages are taken when a sequence grows past its last page (`grow`), and all of a sequence's
pages go back the moment it ends or its client disconnects (`close`). A sequence that asks for
more pages than are free gets `PagesExhausted` and nothing changes, neither for it nor for any
other sequence: a page belongs to one sequence at a time, so a write through one table can
never land in another's pages.

Pure Python, no torch: the batch caches (engine/hearth/batch_cache.py) apply what it decides
to their tensors, and the planner reads `pages_for` to budget N sequences.

    pool = PagePool(n_pages=100, page_size=64)
    seq = pool.open()
    first = pool.grow(seq, 70)        # positions 0..69 -> 2 pages; returns 0
    pool.slot(seq, 65)                # (its second page, 1)
    pool.close(seq)                   # both pages free again
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_SEQUENCES = 64  # sequences one decode step may hold (issue 38: up to 64 clients)


class PagesExhausted(Exception):
    """No free pages (or sequences) for what was asked; the message says what to do."""


def pages_for(n_positions: int, page_size: int) -> int:
    """Pages that hold n_positions positions of one sequence."""
    return -(-n_positions // page_size)


@dataclass
class _Sequence:
    pages: list[int] = field(default_factory=list)
    length: int = 0


class PagePool:
    def __init__(self, n_pages: int, page_size: int, max_sequences: int = MAX_SEQUENCES):
        if n_pages < 1 or page_size < 1 or max_sequences < 1:
            raise ValueError(f"a pool of {n_pages} pages of {page_size}, {max_sequences} seqs")
        self.n_pages, self.page_size, self.max_sequences = n_pages, page_size, max_sequences
        # popped from the end: page 0 first, so a lone sequence's pages are in order
        self._free = list(range(n_pages - 1, -1, -1))
        self._sequences: dict[int, _Sequence] = {}
        self._free_ids = list(range(max_sequences - 1, -1, -1))

    # --- what is held ----------------------------------------------------------------------
    @property
    def free_pages(self) -> int:
        return len(self._free)

    @property
    def sequences(self) -> tuple[int, ...]:
        return tuple(sorted(self._sequences))

    def pages(self, seq: int) -> tuple[int, ...]:
        return tuple(self._sequences[seq].pages)

    def length(self, seq: int) -> int:
        return self._sequences[seq].length

    def capacity(self, seq: int) -> int:
        """Positions seq can hold without another page."""
        return len(self._sequences[seq].pages) * self.page_size

    def slot(self, seq: int, position: int) -> tuple[int, int]:
        """(page, offset in it) of one of seq's positions."""
        s = self._sequences[seq]
        if not 0 <= position < len(s.pages) * self.page_size:
            raise IndexError(f"position {position} of a sequence with {len(s.pages)} pages")
        return s.pages[position // self.page_size], position % self.page_size

    # --- changes ---------------------------------------------------------------------------
    def open(self) -> int:
        """A new, empty sequence (its id is the lowest free one, below max_sequences)."""
        if not self._free_ids:
            raise PagesExhausted(
                f"All {self.max_sequences} sequences of the KV cache are in use. Wait for a "
                "request to finish, or load the model with a larger --parallel."
            )
        seq = self._free_ids.pop()
        self._sequences[seq] = _Sequence()
        return seq

    def grow(self, seq: int, n: int) -> int:
        """Room for n more positions of seq, taking pages as needed; returns the first new
        position. Raises PagesExhausted, changing nothing, when the free pages are too few."""
        s = self._sequences[seq]
        needed = pages_for(s.length + n, self.page_size) - len(s.pages)
        if needed > len(self._free):
            raise PagesExhausted(
                f"The KV cache is full: this request needs {needed} more pages of "
                f"{self.page_size} tokens and {len(self._free)} are free while "
                f"{len(self._sequences)} requests share it. Retry when others finish, or load "
                "the model with a longer context (or fewer --parallel)."
            )
        for _ in range(max(0, needed)):
            s.pages.append(self._free.pop())
        start = s.length
        s.length += n
        return start

    def truncate(self, seq: int, n: int) -> list[int]:
        """Keep seq's first n positions; the pages past them go back. Returns those pages."""
        s = self._sequences[seq]
        if not 0 <= n <= s.length:
            raise ValueError(f"truncate to {n} positions a sequence of {s.length}")
        keep = pages_for(n, self.page_size)
        dropped = s.pages[keep:]
        del s.pages[keep:]
        self._free.extend(reversed(dropped))
        s.length = n
        return dropped

    def close(self, seq: int) -> list[int]:
        """End seq: every page it held is free at once. Returns those pages."""
        s = self._sequences.pop(seq)
        self._free.extend(reversed(s.pages))
        self._free_ids.append(seq)
        self._free_ids.sort(reverse=True)
        return s.pages
