"""Which KV pages each sequence of a batch holds: the page accounting of the multi-sequence cache,
with prompt prefixes shared between sequences.

One pool of `n_pages` pages of `page_size` positions is shared by up to `max_sequences`
sequences. Each sequence has its own page table (its pages in position order) and length.
Pages are taken when a sequence grows past its last page (`grow`), and a sequence's pages are
given back the moment it ends or its client disconnects (`close`). A sequence that asks for
more pages than are free gets `PagesExhausted` and nothing changes, neither for it nor for any
other sequence.

Shared prefixes. Every page has a reference count: the sequences whose tables hold it, plus one
while the prefix index keeps it. `publish` puts a sequence's full pages into the index, keyed by
a chained hash of their token ids (a page's key covers every token before it, so equal keys
mean equal prefixes); `open(tokens)` starts a new sequence from the longest indexed prefix of
its tokens by reference, and the caller computes only the rest. Where the match ends inside a
page, that page is shared too but the sequence's length stops at the match: its next `grow`
writes into it, so it is copied first. No write ever lands in a page another table or the index
holds: `grow` copies a shared page before handing out a position in it (copy on write) and
reports the copy in `take_copies()`, which the batch caches apply to their storage before the
step writes. A page goes back to the free list when its count reaches zero. Pages only the index
holds count as free (`free_pages`): they are evicted, least recently used first, the moment a
sequence needs pages that the free list lacks.

Pure Python, no torch: the batch caches (engine/hearth/batch_cache.py) apply what it decides
to their tensors, and the planner reads `pages_for` to budget N sequences.

    pool = PagePool(n_pages=100, page_size=64)
    seq = pool.open()
    first = pool.grow(seq, 70)        # positions 0..69 -> 2 pages; returns 0
    pool.slot(seq, 65)                # (its second page, 1)
    pool.publish(seq, tokens)         # its first page (64 tokens) into the prefix index
    pool.close(seq)                   # its second page free again; the first stays indexed
    other = pool.open(tokens)         # starts at length 64 on that first page
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_SEQUENCES = 64  # sequences one decode step may hold (issue 38: up to 64 clients)


class PagesExhausted(Exception):
    """No free pages (or sequences) for what was asked; the message says what to do."""


def pages_for(n_positions: int, page_size: int) -> int:
    """Pages that hold n_positions positions of one sequence."""
    return -(-n_positions // page_size)


def page_key(parent: int, tokens: Sequence[int]) -> int:
    """The index key of a page holding `tokens` after the prefix whose last page's key is
    `parent` (0 for the first page): equal keys mean equal prefixes up to a hash collision,
    which the index rules out by comparing the stored parent and tokens."""
    return hash((parent, tuple(tokens)))


@dataclass
class _Sequence:
    pages: list[int] = field(default_factory=list)
    length: int = 0
    keys: list[int] = field(default_factory=list)  # index keys of its first published pages


@dataclass
class _Indexed:
    page: int
    parent: int
    tokens: tuple[int, ...]


class PagePool:
    def __init__(self, n_pages: int, page_size: int, max_sequences: int = MAX_SEQUENCES):
        if n_pages < 1 or page_size < 1 or max_sequences < 1:
            raise ValueError(f"a pool of {n_pages} pages of {page_size}, {max_sequences} seqs")
        self.n_pages, self.page_size, self.max_sequences = n_pages, page_size, max_sequences
        # popped from the end: page 0 first, so a lone sequence's pages are in order
        self._free = list(range(n_pages - 1, -1, -1))
        self._refs = [0] * n_pages
        self._sequences: dict[int, _Sequence] = {}
        self._free_ids = list(range(max_sequences - 1, -1, -1))
        # key -> indexed page, least recently used first
        self._index: collections.OrderedDict[int, _Indexed] = collections.OrderedDict()
        self._children: dict[int, set[int]] = {}  # parent key -> keys of the pages after it
        self._copies: list[tuple[int, int]] = []

    # --- what is held ----------------------------------------------------------------------
    @property
    def free_pages(self) -> int:
        """Pages a sequence can take: the free list and the pages only the index holds."""
        return len(self._free) + self._evictable()

    @property
    def indexed_pages(self) -> int:
        """Pages the prefix index keeps (some may also be in sequences' tables)."""
        return len(self._index)

    @property
    def sequences(self) -> tuple[int, ...]:
        return tuple(sorted(self._sequences))

    def pages(self, seq: int) -> tuple[int, ...]:
        return tuple(self._sequences[seq].pages)

    def length(self, seq: int) -> int:
        return self._sequences[seq].length

    def refs(self, page: int) -> int:
        """How many tables (and the index) hold page."""
        return self._refs[page]

    def capacity(self, seq: int) -> int:
        """Positions seq can hold without another page."""
        return len(self._sequences[seq].pages) * self.page_size

    def slot(self, seq: int, position: int) -> tuple[int, int]:
        """(page, offset in it) of one of seq's positions."""
        s = self._sequences[seq]
        if not 0 <= position < len(s.pages) * self.page_size:
            raise IndexError(f"position {position} of a sequence with {len(s.pages)} pages")
        return s.pages[position // self.page_size], position % self.page_size

    def match(self, tokens: Sequence[int], limit: int | None = None) -> tuple[list[int], int]:
        """The indexed pages that hold the longest prefix of `tokens` (at most `limit` of
        them), and that prefix's length. The last page may hold only part of the match."""
        limit = len(tokens) if limit is None else min(limit, len(tokens))
        size, pages, parent, n = self.page_size, [], 0, 0
        while n < limit:
            page_tokens = tuple(tokens[n : n + size])
            key = page_key(parent, page_tokens)
            hit = self._index.get(key)
            if (
                len(page_tokens) == size
                and n + size <= limit
                and hit is not None
                and (hit.parent, hit.tokens) == (parent, page_tokens)
            ):
                pages.append(hit.page)
                parent, n = key, n + size
                continue
            # the match ends inside this page: the indexed page after `parent` that agrees
            # longest with the tokens left (copied before the sequence writes into it)
            best, best_n = None, 0
            for child in self._children.get(parent, ()):
                same = _common_length(self._index[child].tokens, page_tokens[: limit - n])
                if same > best_n:
                    best, best_n = self._index[child].page, same
            if best is not None:
                pages.append(best)
                n += best_n
            break
        return pages, n

    # --- changes ---------------------------------------------------------------------------
    def open(self, tokens: Sequence[int] = (), limit: int | None = None) -> int:
        """A new sequence (its id is the lowest free one, below max_sequences), starting from
        the longest indexed prefix of `tokens` (at most `limit` tokens) by reference: its
        `length` is where the caller's computation starts."""
        if not self._free_ids:
            raise PagesExhausted(
                f"All {self.max_sequences} sequences of the KV cache are in use. Wait for a "
                "request to finish, or load the model with a larger --parallel."
            )
        pages, n = self.match(tokens, limit) if tokens else ([], 0)
        seq = self._free_ids.pop()
        s = _Sequence(pages=list(pages), length=n)
        self._sequences[seq] = s
        for page in pages:
            self._refs[page] += 1
        keys, parent = [], 0
        for i in range(n // self.page_size):
            parent = page_key(parent, tuple(tokens[i * self.page_size : (i + 1) * self.page_size]))
            keys.append(parent)
        s.keys = keys
        self._touch(keys)
        return seq

    def grow(self, seq: int, n: int) -> int:
        """Room for n more positions of seq, taking pages as needed; returns the first new
        position. A shared page that the new positions fall in is copied first (see
        take_copies). Raises PagesExhausted, changing nothing, when the free pages are too
        few."""
        s = self._sequences[seq]
        size = self.page_size
        copy_last = s.length % size != 0 and n > 0 and self._refs[s.pages[-1]] > 1
        needed = max(0, pages_for(s.length + n, size) - len(s.pages)) + int(copy_last)
        if needed > len(self._free) and needed > self.free_pages:
            raise PagesExhausted(
                f"The KV cache is full: this request needs {needed} more pages of "
                f"{size} tokens and {self.free_pages} are free while "
                f"{len(self._sequences)} requests share it. Retry when others finish, or load "
                "the model with a longer context (or fewer --parallel)."
            )
        new = self._take(needed)
        if copy_last:
            old, s.pages[-1] = s.pages[-1], new.pop()
            self._copies.append((old, s.pages[-1]))
            self._release([old])
        s.pages.extend(new)
        start = s.length
        s.length += n
        return start

    def take_copies(self) -> list[tuple[int, int]]:
        """(from page, to page) of every copy on write since the last call, in order: the
        storage copies these before anything is written into the new pages."""
        copies, self._copies = self._copies, []
        return copies

    def publish(self, seq: int, tokens: Sequence[int]) -> int:
        """Put seq's full pages into the prefix index; `tokens` are its token ids, position
        by position (at least its length). A prefix already indexed keeps its page. Returns
        how many pages seq has in the index now."""
        s = self._sequences[seq]
        size = self.page_size
        full = min(s.length, len(tokens)) // size
        parent = s.keys[-1] if s.keys else 0
        if full <= len(s.keys):
            return len(s.keys)
        for i in range(len(s.keys), full):
            page_tokens = tuple(tokens[i * size : (i + 1) * size])
            key = page_key(parent, page_tokens)
            if key not in self._index:
                self._index[key] = _Indexed(s.pages[i], parent, page_tokens)
                self._children.setdefault(parent, set()).add(key)
                self._refs[s.pages[i]] += 1
            s.keys.append(key)
            parent = key
        self._touch(s.keys)
        return len(s.keys)

    def truncate(self, seq: int, n: int) -> list[int]:
        """Keep seq's first n positions; its pages past them are released (freed when nothing
        else holds them). Returns the pages it dropped."""
        s = self._sequences[seq]
        if not 0 <= n <= s.length:
            raise ValueError(f"truncate to {n} positions a sequence of {s.length}")
        keep = pages_for(n, self.page_size)
        dropped = s.pages[keep:]
        del s.pages[keep:]
        del s.keys[n // self.page_size :]
        self._release(dropped)
        s.length = n
        return dropped

    def close(self, seq: int) -> list[int]:
        """End seq: every page it held is released at once (freed unless another sequence or
        the index holds it). Returns those pages."""
        s = self._sequences.pop(seq)
        self._release(s.pages)
        self._free_ids.append(seq)
        self._free_ids.sort(reverse=True)
        return s.pages

    # --- the counts ------------------------------------------------------------------------
    def _evictable(self) -> int:
        return sum(1 for e in self._index.values() if self._refs[e.page] == 1)

    def _take(self, n: int) -> list[int]:
        """n pages off the free list, evicting indexed pages nothing else holds, least
        recently used first, when it is short. The caller has checked free_pages."""
        if n > len(self._free):
            for key in [k for k, e in self._index.items() if self._refs[e.page] == 1]:
                if n <= len(self._free):
                    break
                self._evict(key)
        taken = [self._free.pop() for _ in range(n)]
        for page in taken:
            self._refs[page] = 1
        return taken

    def _evict(self, key: int) -> None:
        entry = self._index.pop(key)
        self._children.get(entry.parent, set()).discard(key)
        if not self._children.get(entry.parent, True):
            del self._children[entry.parent]
        self._release([entry.page])

    def _release(self, pages: list[int]) -> None:
        for page in reversed(pages):
            self._refs[page] -= 1
            if self._refs[page] == 0:
                self._free.append(page)

    def _touch(self, keys: list[int]) -> None:
        """keys were just used: most recently used, a prefix's first page last, so a chain
        is evicted from its end (a page after an evicted one could not be matched)."""
        for key in reversed(keys):
            if key in self._index:
                self._index.move_to_end(key)


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
