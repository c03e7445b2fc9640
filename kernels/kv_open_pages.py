"""kivi4 keys' host side in a paged KV cache (kv_cache.py): each sequence's open page, the last
chunk's exact rows, and the launches of kv_kivi.py's kernels that seal pages after a write and
reopen one after a truncation.

The open pages are slots made with the cache, a slot per sequence while it lives: per layer
[slots, 2, HKV, P, D] f16 (K and V rows of the page of the sequence's last written position),
and beside them on the device the page number each slot holds. Keys in another format get no
slots: their kernels still take an open page and a slot (always 0), never read.
"""

from __future__ import annotations

import math

import torch

from kernels.errors import UnsupportedTensor
from kernels.kv_formats import KVCacheSpec, kivi_group
from kernels.kv_kivi import kivi_open_kernel, kivi_reopen_kernel, kivi_seal_kernel
from kernels.kv_tiles import FORMAT_CODES
from kernels.launch import has_dependent_launch


class KiviOpenPages:
    def __init__(self, spec: KVCacheSpec, device: torch.device, open_pages: int) -> None:
        """open_pages: how many sequences a kivi4 K cache holds at once (unused by the other
        formats)."""
        self.spec = spec
        self.device = device
        self.kivi = spec.k_format == "kivi4"
        slots = open_pages if self.kivi else 0
        shape = (slots, 2, spec.n_kv_heads, spec.page_size, spec.head_dim) if self.kivi else (1,)
        self.rows = [
            torch.zeros(shape, dtype=torch.float16, device=device) for _ in range(spec.n_layers)
        ]
        # per layer and slot: the page of the sequence that the open page holds
        self.page_numbers = [
            torch.zeros(max(slots, 1), dtype=torch.int32, device=device)
            for _ in range(spec.n_layers)
        ]
        self._free_slots = list(range(slots - 1, -1, -1))
        self.slots: dict[int, int] = {}
        self.slot_tensors: dict[int, torch.Tensor] = {}
        # the last multi-row write's K and V rows in f16 (kv_kivi.py), which that layer's
        # attend_prefill appends as exact keys: (layer, rows, start). One for the whole cache,
        # replaced by the next write of a chunk at any layer: the forward pass writes a layer's
        # chunk and attends it before the next layer's, so one is alive at a time, not one per
        # layer made amid a chunk's transient buffers and kept after them.
        self.scratch: tuple[int, torch.Tensor, int | torch.Tensor] | None = None
        # layers whose chunk's rows another layer's write replaced (attend_prefill refuses)
        self._scratch_replaced: set[int] = set()

    @property
    def bytes(self) -> int:
        """Memory of the open pages, all slots and layers (0 for other K formats)."""
        if not self.kivi:
            return 0
        return sum(t.numel() * t.element_size() for t in self.rows)

    def of_layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(open pages, their page numbers) of `layer`: what the write, attention and gather
        kernels take."""
        return self.rows[layer], self.page_numbers[layer]

    def take_slot(self, seq: int) -> None:
        """A slot for the new sequence seq (slot 0, shared and never read, for other K formats)."""
        if self.kivi and not self._free_slots:
            raise UnsupportedTensor(
                f"all {len(self.slots)} open pages of the kivi4 K cache are taken: free a "
                "sequence, or make the cache with more open_pages"
            )
        slot = self._free_slots.pop() if self.kivi else 0
        self.slots[seq] = slot
        self.slot_tensors[seq] = torch.full((1,), slot, dtype=torch.int32, device=self.device)
        if self.kivi:  # a slot freed by another sequence holds none of this one's pages
            for numbers in self.page_numbers:
                numbers[slot] = -1

    def free_slot(self, seq: int) -> None:
        if self.kivi:
            self._free_slots.append(self.slots[seq])
        self.slots.pop(seq)
        self.slot_tensors.pop(seq)

    def reopen_page(self, layer, seq, table, pg, k_pointers, v_pointers, signs) -> None:
        """Page pg of seq (sealed, or the open one already) as `layer`'s open page (kv_kivi.py):
        its rows dequantized into the slot, then the slot's page number set."""
        spec = self.spec
        slot = self.slots[seq]
        kivi_reopen_kernel[(spec.n_kv_heads,)](
            self.rows[layer], self.page_numbers[layer], table, slot, pg,
            *k_pointers, *v_pointers, signs,
            HKV=spec.n_kv_heads, D=spec.head_dim, LOG2D=int(math.log2(spec.head_dim)),
            P=spec.page_size, G=kivi_group(spec.page_size), V_FMT=FORMAT_CODES[spec.v_format],
        )  # fmt: skip
        self.page_numbers[layer][slot] = pg

    def scratch_for_write(self, layer: int, start, shape: tuple) -> torch.Tensor | None:
        """Before a write of rows `shape` [n, HKV, D] at `layer` from `start`: the f16 scratch
        [2, n + P, HKV, D] the write kernel puts its K and V rows in from the first one's page
        start (kept as the chunk's exact rows), or None for one row (written straight into the
        open page)."""
        chunk = shape[0] > 1
        self._drop_scratch(layer, replaced_by_chunk=chunk)
        if not chunk:
            return None
        # zeros: the rows past the last are masked in attend_prefill, never NaN
        rows = torch.zeros(2, shape[0] + self.spec.page_size, *shape[1:], dtype=torch.float16,
                           device=self.device)  # fmt: skip
        self.scratch = (layer, rows, start)
        return rows

    def _drop_scratch(self, layer: int, *, replaced_by_chunk: bool) -> None:
        """Before a kivi4 write at `layer`: its own earlier rows are stale; another layer's
        rows go when this write makes new ones (freed before those are made), and that layer
        can no longer attend its chunk."""
        self._scratch_replaced.discard(layer)
        if self.scratch is None:
            return
        kept = self.scratch[0]
        if kept == layer or replaced_by_chunk:
            self.scratch = None
            if kept != layer:
                self._scratch_replaced.add(kept)

    def seal(self, layer, seq, table, table_pages, k_pointers, first, position_arg, n, scratch,
             on_device) -> None:  # fmt: skip
        """kivi4 K after the write kernel: the pages the write filled sealed, and (n > 1) its
        last page's rows into the open page (kv_kivi.py)."""
        spec = self.spec
        common = {"HKV": spec.n_kv_heads, "D": spec.head_dim, "P": spec.page_size}
        open_rows, open_page, slot = self.rows[layer], self.page_numbers[layer], self.slots[seq]
        kivi_seal_kernel[((n + spec.page_size - 2) // spec.page_size + 1, spec.n_kv_heads)](
            scratch, open_rows, table, position_arg, first, n, table_pages, slot,
            *k_pointers, G=kivi_group(spec.page_size), POSITIONS=on_device,
            SCRATCH=n > 1, **common, **self._dependent(),
        )  # fmt: skip
        if n > 1:
            kivi_open_kernel[(spec.n_kv_heads,)](
                scratch, scratch.shape[1], open_rows, open_page, position_arg, first, n, slot,
                POSITIONS=on_device, **common,
            )  # fmt: skip

    def seal_rows(self, layer, tables, positions, table_pages, k_pointers, slots) -> None:
        """kivi4 K after a batch's one-row writes (PagedKVCache.write_rows): each row's page
        sealed where the row filled it, from the open page of its slot (slots [rows] int32 on
        the device; positions moved into the stacked `tables`, as the write had them)."""
        spec = self.spec
        self._drop_scratch(layer, replaced_by_chunk=False)
        open_rows = self.rows[layer]
        kivi_seal_kernel[(positions.numel(), spec.n_kv_heads)](
            open_rows, open_rows, tables, positions, 0, 1, table_pages, slots, *k_pointers,
            HKV=spec.n_kv_heads, D=spec.head_dim, P=spec.page_size,
            G=kivi_group(spec.page_size), POSITIONS=True, SCRATCH=False, ROWS=True,
            **self._dependent(),
        )  # fmt: skip

    def _dependent(self) -> dict:
        """The seal's launch as the write's dependent where the GPU has one (its GDC): a
        step's seal, nothing to do on 63 of 64 steps, then costs no launch gap of its own (a
        32k step on an H200: Qwen3-30B-A3B 2.80 -> 2.74 ms, Llama-3-8B 2.85 -> 2.81,
        docs/decisions/2026-11-30-decode-step-launch-edges.md)."""
        if not has_dependent_launch(self.device):
            return {}
        return {"GDC": True, "launch_pdl": True}

    def layer_scratch(self, layer: int) -> tuple[torch.Tensor, int | torch.Tensor] | None:
        """(rows, start) of the exact rows of `layer`'s last chunk, None where its last write
        was one row (its page is the open one). Raises where another layer's chunk replaced
        them: the chunk would attend its own pages as stored, not as written."""
        if layer in self._scratch_replaced:
            raise UnsupportedTensor(
                f"layer {layer}'s chunk attended after another layer's chunk was written: "
                "kivi4 keeps the exact rows of the last written chunk only"
            )
        if self.scratch is None or self.scratch[0] != layer:
            return None
        return self.scratch[1], self.scratch[2]
