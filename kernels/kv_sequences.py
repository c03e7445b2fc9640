"""The pages of a paged KV cache's sequences (kv_cache.PagedKVCache is one): the free list of
one pool of pages, each sequence's pages in position order, its length, and both on the device
(a block table of n_pages entries, -1 past its pages, and a [1] length), so that the kernels
read them without a copy from the host; the table changes only where a page is added or given
back. A view is a sequence with no pages of its own that shows another's (`show`).

kivi4 keys keep each sequence's open page in a slot of its own (kv_open_pages.KiviOpenPages):
a sequence takes one when it starts and gives it back when it ends, and a sequence cut back
reopens the page of its last position (`reopen`, which the cache defines).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton

from kernels.errors import UnsupportedTensor
from kernels.kv_open_pages import KiviOpenPages


def _to_device(dst: torch.Tensor, values: list[int]) -> None:
    """Write host values into part of a block table without waiting for the device: a copy
    that blocks would wait for every step launched before it (a batch launches its next
    step before taking the last one's tokens, engine/runtime/hearth_batch.py). CUDA stages
    the host values before the call returns."""
    dst.copy_(torch.tensor(values, dtype=dst.dtype), non_blocking=True)


class KVSequences:
    """Sequences over a pool of n_pages pages of page_size positions (module docstring)."""

    def __init__(self, n_pages: int, page_size: int, device: torch.device,
                 open_pages: KiviOpenPages, kivi: bool) -> None:  # fmt: skip
        self.n_pages = n_pages
        self.page_size = page_size
        self.device = device
        self.kivi = kivi
        self._open_pages = open_pages
        self._free = list(range(n_pages - 1, -1, -1))
        self._pages: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}
        self._tables: dict[int, torch.Tensor] = {}
        self._length_tensors: dict[int, torch.Tensor] = {}
        self._next_seq = 0
        self._views: set[int] = set()  # new_view's sequences

    def new_sequence(self) -> int:
        seq = self._next_seq
        self._open_pages.take_slot(seq)  # raises, changing nothing, where none is free
        self._next_seq += 1
        self._pages[seq] = []
        self._lengths[seq] = 0
        # -1: no page; writes there are dropped (kv_write_kernel)
        self._tables[seq] = torch.full((self.n_pages,), -1, dtype=torch.int32, device=self.device)
        self._length_tensors[seq] = torch.zeros(1, dtype=torch.int32, device=self.device)
        return seq

    def new_view(self) -> int:
        """A sequence with no pages of its own, through which kernels read and write the pages
        of the sequence `show` last gave it: its block table stays at one address whichever
        sequence it shows (a CUDA graph's, replayed for each of a batch's prompts). `gather`
        reads it to the table's end, a page not shown as zeros; a write past the shown pages
        is dropped. Not for kivi4 keys (their open page is a sequence's own)."""
        if self.kivi:
            raise UnsupportedTensor("a kivi4 K cache has no views: its open pages are per sequence")
        view = self.new_sequence()
        self._views.add(view)
        return view

    def show(self, view: int, seq: int) -> None:
        """The view's block table becomes seq's (a copy on the device, in stream order)."""
        self._tables[view].copy_(self._tables[seq], non_blocking=True)

    def free_sequence(self, seq: int) -> None:
        self._views.discard(seq)
        self._open_pages.free_slot(seq)
        self._free.extend(reversed(self._pages.pop(seq)))
        for table in (self._lengths, self._tables, self._length_tensors):
            table.pop(seq)

    def length(self, seq: int) -> int:
        return self._lengths[seq]

    def block_table(self, seq: int) -> torch.Tensor:
        """seq's block table on the device, [n_pages] int32, -1 past its pages (what the
        kernels read; a CUDA graph of a batch copies it into its static tables)."""
        return self._tables[seq]

    def grow(self, seq: int, n: int) -> int:
        """Reserve n more positions for seq; returns the first of them."""
        start = self._lengths[seq]
        pages = self._pages[seq]
        needed = triton.cdiv(start + n, self.page_size) - len(pages)
        if needed > len(self._free):
            raise UnsupportedTensor(
                f"the KV cache is full: {needed} more pages of {self.page_size} positions "
                f"asked for, {len(self._free)} free; make max_tokens larger or free a sequence"
            )
        if needed > 0:
            new = [self._free.pop() for _ in range(needed)]
            _to_device(self._tables[seq][len(pages) : len(pages) + needed], new)
            pages.extend(new)
        self._lengths[seq] = start + n
        self._length_tensors[seq].fill_(start + n)
        return start

    def assign(self, seq: int, pages: Sequence[int], n: int) -> None:
        """Give seq exactly `pages` (in position order) and length n: for a caller that keeps
        its own page accounting (engine/hearth/page_pool.py, where sequences share pages), so
        a sequence driven this way never takes from or gives back to this cache's own free
        list. Only the changed part of the block table is written."""
        old, pages = self._pages[seq], list(pages)
        if pages != old:
            first = next(
                (i for i, (a, b) in enumerate(zip(old, pages, strict=False)) if a != b),
                min(len(old), len(pages)),
            )
            table = self._tables[seq]
            if len(pages) > first:
                _to_device(table[first : len(pages)], pages[first:])
            if len(old) > len(pages):
                table[len(pages) : len(old)] = -1
            self._pages[seq] = pages
        if self._lengths[seq] != n:
            self._lengths[seq] = n
            self._length_tensors[seq].fill_(n)

    def truncate(self, seq: int, n: int) -> None:
        """Keep seq's first n positions (a chat turn that edits history): the pages past them
        go back to the pool, and the next `grow` continues at n."""
        if not 0 <= n <= self._lengths[seq]:
            raise UnsupportedTensor(
                f"truncating a sequence of {self._lengths[seq]} positions to {n}: "
                "keep between 0 and its length"
            )
        pages = self._pages[seq]
        keep = triton.cdiv(n, self.page_size)
        self._free.extend(reversed(pages[keep:]))
        del pages[keep:]
        self._tables[seq][keep:] = -1
        self._lengths[seq] = n
        self._length_tensors[seq].fill_(n)
        self.reopen(seq, n)

    def reopen(self, seq: int, n: int) -> None:
        """After seq is cut back to n positions: what the formats need (kv_cache's kivi4 keys
        reopen a page); nothing here."""
