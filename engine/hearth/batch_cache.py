"""The KV cache of a batch: many sequences in one page pool, and the view a forward pass of the
batch's rows writes and attends through.

    cache = new_batch_cache(layout, n_layer=.., n_head_kv=.., head_dim=.., n_pages=.., device=..)
    a, b = cache.new_sequence(), cache.new_sequence()
    cache.grow(a, 1); cache.grow(b, 1)
    rows = cache.rows([a, b], [pos_a, pos_b])        # row i belongs to sequence i
    logits = transformer.forward(tokens, positions, rows, n_keys=0, all_logits=True)

The forward pass (engine/hearth/forward.py) is the one-sequence forward unchanged: it asks a
cache only to `write` a step's K and V rows and to `attend` its queries, and `BatchRows` answers
both per row. Row i's K and V go to position positions[i] of its own sequence's pages; its query
attends over that sequence's positions up to its own. The rows of one sequence are contiguous:
one row for a sequence that decodes, a run of rows for a prompt chunk (chunked prefill), so one
forward pass serves decode steps and a joining prompt together.

Page accounting is engine/hearth/page_pool.py's (a sequence takes pages as it grows and gives
them back when it ends; a sequence opened with its prompt's tokens starts from the pages of an
indexed prefix by reference, and a shared page is copied before a write lands in it: `grow`
applies the pool's copies to the storage before returning); the storage is one of two:

- `TorchBatchCache`: plain torch tensors of pages (the CPU path, tests). A sequence's rows are
  gathered from its pages and attended by TorchKVCache's own attention, so a batched step
  computes what the one-sequence path computes.
- `KernelsBatchCache`: kernels.PagedKVCache on a GPU, any K/V format. A step's decode rows are
  written in one launch (PagedKVCache.write_rows; kivi4 keys: each into its sequence's open
  page, then the pages they filled sealed) and attend in one flash-decoding launch over their
  own block tables; a prompt chunk attends through the prefill path over its sequence's
  gathered pages (kivi4 keys: the chunk is written just before, so that the cache's one copy
  of a chunk's exact rows is its own when it attends). A kivi4 sequence keeps an open page of
  its own (a slot per sequence); one that starts from shared pages, or is cut back, reopens
  the page of its last position.
"""

from __future__ import annotations

import torch

from engine.hearth.cache_layout import PAGE_SIZE, CacheLayout
from engine.hearth.kv_cache import TorchKVCache, attention_with_sinks
from engine.hearth.page_pool import MAX_SEQUENCES, PagePool


class BatchCacheBase:
    """The sequences' page accounting; the subclasses keep the rows."""

    def __init__(self, n_pages: int, page_size: int, max_sequences: int):
        self.pool = PagePool(n_pages, page_size, max_sequences)
        self.page_size = page_size

    def new_sequence(
        self, tokens: list[int] | tuple[int, ...] = (), limit: int | None = None
    ) -> int:
        """A new sequence; with `tokens`, it starts from the longest indexed prefix of them
        (at most `limit`), and `length(seq)` says how many positions it already holds."""
        return self.pool.open(tokens, limit)

    def free_sequence(self, seq: int) -> None:
        """seq's pages go back to the pool at once (a finished or disconnected request);
        pages another sequence or the prefix index holds stay."""
        self.pool.close(seq)

    def grow(self, seq: int, n: int) -> int:
        """Room for n more positions of seq; returns the first. A shared page the new
        positions fall in is copied first. Raises PagesExhausted, changing nothing."""
        start = self.pool.grow(seq, n)
        for src, dst in self.pool.take_copies():
            self.copy_page(src, dst)
        return start

    def publish(self, seq: int, tokens: list[int]) -> int:
        """seq's full pages into the prefix index (`tokens`: its token ids by position)."""
        return self.pool.publish(seq, tokens)

    def copy_page(self, src: int, dst: int) -> None:
        raise NotImplementedError

    def truncate(self, seq: int, n: int) -> None:
        self.pool.truncate(seq, n)

    def length(self, seq: int) -> int:
        return self.pool.length(seq)

    def rows(self, seqs: list[int], positions: list[int]) -> BatchRows:
        return BatchRows(self, seqs, positions)


def row_groups(seqs: list[int]) -> list[tuple[int, int, int]]:
    """(seq, first row, row past the last) of each run of one sequence's rows; a sequence
    whose rows are not one run is refused (its rows would attend in two halves)."""
    groups: list[tuple[int, int, int]] = []
    for i, seq in enumerate(seqs):
        if groups and groups[-1][0] == seq:
            groups[-1] = (seq, groups[-1][1], i + 1)
        else:
            groups.append((seq, i, i + 1))
    if len({g[0] for g in groups}) != len(groups):
        raise ValueError(f"the rows of each sequence must be contiguous: {seqs}")
    return groups


class BatchRows:
    """One forward pass's rows: which sequence and position each is (host lists, made once per
    step), with the cache calls the forward pass makes."""

    def __init__(self, cache: BatchCacheBase, seqs: list[int], positions: list[int]):
        if len(seqs) != len(positions):
            raise ValueError(f"{len(seqs)} sequences for {len(positions)} positions")
        for seq, pos in zip(seqs, positions, strict=True):
            if not 0 <= pos < cache.length(seq):
                raise ValueError(f"position {pos} of sequence {seq} before it was grown")
        self.cache, self.seqs, self.positions = cache, list(seqs), list(positions)
        self.groups = row_groups(self.seqs)
        self._prepared = cache.prepare(self)

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self.cache.write(self, self._prepared, layer, positions, k, v)

    def attend(
        self, layer, q, positions, n_keys, *, scale: float, window: int = 0, sinks=None,
        masks: dict | None = None,
    ):  # fmt: skip
        """n_keys is the one-sequence forward's; each sequence here sees its own length.
        masks: the forward pass's for this step; each chunk's masks are kept under its
        sequence."""
        return self.cache.attend(
            self, self._prepared, layer, q, positions, scale, window, sinks, masks
        )


class TorchBatchCache(BatchCacheBase):
    """Pages as plain torch tensors [n_layer, n_kv_heads, n_pages * page_size, head_dim]."""

    def __init__(
        self,
        *,
        n_layer: int,
        n_head_kv: int,
        head_dim: int,
        n_pages: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float16,
        page_size: int = PAGE_SIZE,
        max_sequences: int = MAX_SEQUENCES,
    ):
        super().__init__(n_pages, page_size, max_sequences)
        shape = (n_layer, n_head_kv, n_pages * page_size, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.device = self.k.device

    @property
    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    def copy_page(self, src: int, dst: int) -> None:
        size = self.page_size
        for planes in (self.k, self.v):
            planes[:, :, dst * size : (dst + 1) * size] = planes[
                :, :, src * size : (src + 1) * size
            ]

    def slots(self, seq: int, n: int) -> torch.Tensor:
        """Where seq's positions 0..n-1 are in the pages' slot axis."""
        pages = torch.tensor(self.pool.pages(seq), dtype=torch.int64)
        within = torch.arange(self.page_size, dtype=torch.int64)
        return (pages[:, None] * self.page_size + within[None, :]).reshape(-1)[:n].to(self.device)

    def prepare(self, rows: BatchRows) -> dict:
        row_slots = torch.tensor(
            [self.pool.slot(s, p)[0] * self.page_size + p % self.page_size
             for s, p in zip(rows.seqs, rows.positions, strict=True)],
            dtype=torch.int64, device=self.device,
        )  # fmt: skip
        keys = {seq: self.slots(seq, max(rows.positions[a:b]) + 1) for seq, a, b in rows.groups}
        return {"row_slots": row_slots, "keys": keys}

    def write(self, rows, prepared, layer, positions, k, v) -> None:
        slots = prepared["row_slots"]
        self.k[layer].index_copy_(1, slots, k.transpose(0, 1).to(self.k.dtype))
        self.v[layer].index_copy_(1, slots, v.transpose(0, 1).to(self.v.dtype))

    def attend(self, rows, prepared, layer, q, positions, scale, window, sinks, masks=None):
        out = []
        for seq, a, b in rows.groups:
            slots = prepared["keys"][seq]
            one = TorchKVCache.over_rows(
                self.k[layer].index_select(1, slots), self.v[layer].index_select(1, slots)
            )
            out.append(
                one.attend(
                    0, q[a:b], positions[a:b], slots.numel(), scale=scale, window=window,
                    sinks=sinks, masks=_sequence_masks(masks, seq),
                )
            )  # fmt: skip
        return torch.cat(out) if len(out) > 1 else out[0]


class KernelsBatchCache(BatchCacheBase):
    """kernels.PagedKVCache for the rows (see the module docstring). The pool here decides
    which pages each sequence holds (shared ones included), and every change is handed to
    the kernels' block tables (PagedKVCache.assign), which are what the kernels read; a copy
    on write copies the page in the kernels' own storage (PagedKVCache.copy_page)."""

    def __init__(
        self,
        *,
        n_layer: int,
        n_head_kv: int,
        head_dim: int,
        n_pages: int,
        device: torch.device | str,
        k_format: str,
        v_format: str,
        page_size: int = PAGE_SIZE,
        max_sequences: int = MAX_SEQUENCES,
    ):
        import kernels

        super().__init__(n_pages, page_size, max_sequences)
        self.spec = kernels.KVCacheSpec(
            n_layers=n_layer, n_kv_heads=n_head_kv, head_dim=head_dim, k_format=k_format,
            v_format=v_format, page_size=page_size, max_tokens=n_pages * page_size,
        )  # fmt: skip
        self.kivi = k_format == "kivi4"
        # kivi4 keys: an open page per sequence (slots), the others none
        self.cache = kernels.PagedKVCache(
            self.spec, device=device, open_pages=max_sequences if self.kivi else 1
        )
        self.device = self.cache.device
        self._kernel_seq: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        return self.spec.bytes_per_token * self.spec.n_layers * self.spec.max_tokens

    def new_sequence(
        self, tokens: list[int] | tuple[int, ...] = (), limit: int | None = None
    ) -> int:
        seq = super().new_sequence(tokens, limit)
        self._kernel_seq[seq] = self.cache.new_sequence()
        self._assign(seq)
        if self.kivi:  # started from shared pages: the last one's rows open for its writes
            self.cache.reopen(self._kernel_seq[seq], self.length(seq))
        return seq

    def _assign(self, seq: int) -> None:
        self.cache.assign(self._kernel_seq[seq], self.pool.pages(seq), self.pool.length(seq))

    def copy_page(self, src: int, dst: int) -> None:
        self.cache.copy_page(src, dst)

    def kernel_sequence(self, seq: int) -> int:
        """seq's number in kernels.PagedKVCache (for its block table)."""
        return self._kernel_seq[seq]

    def free_sequence(self, seq: int) -> None:
        super().free_sequence(seq)
        kseq = self._kernel_seq.pop(seq)
        self.cache.assign(kseq, (), 0)  # the pool, not the kernels' list, frees its pages
        self.cache.free_sequence(kseq)

    def grow(self, seq: int, n: int) -> int:
        start = super().grow(seq, n)  # raises first, with the pool's message
        self._assign(seq)
        return start

    def truncate(self, seq: int, n: int) -> None:
        super().truncate(seq, n)
        self._assign(seq)
        self.cache.reopen(self._kernel_seq[seq], n)  # (kivi4 keys; nothing for the others)

    def prepare(self, rows: BatchRows) -> dict:
        device = self.device
        single = [a for _, a, b in rows.groups if b - a == 1]
        return {
            "row_seqs": [self._kernel_seq[s] for s in rows.seqs],
            "single": torch.tensor(single, dtype=torch.int64, device=device),
            "single_seqs": [self._kernel_seq[rows.seqs[a]] for a in single],
            "chunks": [
                (self._kernel_seq[seq], a, b, max(rows.positions[a:b]) + 1)
                for seq, a, b in rows.groups
                if b - a > 1
            ],
        }

    def write(self, rows, prepared, layer, positions, k, v) -> None:
        positions = positions.to(self.device)
        k, v = k.to(torch.float16), v.to(torch.float16)
        if not self.kivi:
            self.cache.write_rows(layer, prepared["row_seqs"], positions, k, v)
            return
        single = prepared["single"]
        if single.numel():
            self.cache.write_rows(
                layer, prepared["single_seqs"], positions.index_select(0, single),
                k.index_select(0, single), v.index_select(0, single),
            )  # fmt: skip
        prepared["chunk_rows"] = (layer, positions, k, v)  # written by `attend`, chunk by chunk

    def attend(self, rows, prepared, layer, q, positions, scale, window, sinks, masks=None):
        positions = positions.to(self.device)
        if sinks is not None:  # the kernels take no sinks: gathered and attended in torch
            return self._attend_with_sinks(
                rows, prepared, layer, q, positions, scale, window, sinks
            )
        out = torch.empty_like(q)
        single = prepared["single"]
        if single.numel():
            got = self.cache.attend(
                layer, q.index_select(0, single).to(torch.float16), prepared["single_seqs"],
                scale=scale, window=window, positions=positions.index_select(0, single),
            )  # fmt: skip
            out.index_copy_(0, single, got.to(q.dtype))
        for kseq, a, b, n_keys in prepared["chunks"]:
            if self.kivi:
                self._write_chunk(prepared, layer, kseq, a, b)
            got = self.cache.attend_prefill(
                layer, q[a:b], kseq, positions[a:b], n_keys, scale=scale, window=window,
                masks=_sequence_masks(masks, kseq),
            )  # fmt: skip
            out[a:b] = got.to(q.dtype)
        return out

    def _write_chunk(self, prepared, layer, kseq, a, b) -> None:
        """kivi4 keys: rows a..b-1 of the step (one sequence's chunk) written, as `write` left
        them for `attend`."""
        written_at, positions, k, v = prepared["chunk_rows"]
        if written_at != layer:
            raise RuntimeError(f"layer {layer} attended before its K and V were written")
        self.cache.write(layer, kseq, positions[a:b], k[a:b], v[a:b])

    def _attend_with_sinks(self, rows, prepared, layer, q, positions, scale, window, sinks):
        out = []
        if self.kivi:  # the chunks' rows first (`write` left them for `attend`)
            for kseq, a, b, _ in prepared["chunks"]:
                self._write_chunk(prepared, layer, kseq, a, b)
        for seq, a, b in rows.groups:
            n = max(rows.positions[a:b]) + 1
            k, v = self.cache.gather(layer, self._kernel_seq[seq], n)
            slots = torch.arange(n, device=positions.device)
            seen = slots[None, :] <= positions[a:b, None]
            if window > 0:
                seen &= positions[a:b, None] - slots[None, :] < window
            out.append(
                attention_with_sinks(q[a:b], k.transpose(0, 1), v.transpose(0, 1), seen, scale,
                                     sinks)
            )  # fmt: skip
        return torch.cat(out)


def _sequence_masks(masks: dict | None, seq: int) -> dict | None:
    """The masks of one sequence's chunk within a step's (each chunk has its own positions)."""
    return masks.setdefault(("sequence", seq), {}) if masks is not None else None


def new_batch_cache(
    layout: CacheLayout,
    *,
    n_layer: int,
    n_head_kv: int,
    head_dim: int,
    n_pages: int,
    device: torch.device | str,
    max_sequences: int = MAX_SEQUENCES,
) -> BatchCacheBase:
    """The batch cache for `layout` (engine/hearth/cache_layout.py): paged kernels on a GPU,
    torch pages elsewhere, each with `n_pages` pages of PAGE_SIZE positions."""
    dims = dict(n_layer=n_layer, n_head_kv=n_head_kv, head_dim=head_dim, n_pages=n_pages,
                device=device, max_sequences=max_sequences)  # fmt: skip
    if layout.paged:
        return KernelsBatchCache(**dims, k_format=layout.type_k, v_format=layout.type_v)
    dtype = torch.float16 if layout.plain_element_bytes == 2 else torch.float32
    return TorchBatchCache(**dims, dtype=dtype)
