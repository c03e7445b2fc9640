"""A batch's decode step captured in CUDA graphs, one per batch-size bucket (1, 2, 4, ... 64).

A decode step of an 8B model is some 500 kernels; launched from Python one by one, the launches
set the pace for a small batch. Each bucket's step (the rows' embedding from the device table,
every layer, the output matrix) is captured once and replayed; a step of n sequences takes the
smallest bucket of n or more, its spare rows pointed at a one-page scratch sequence of the pool
(they write and read only that page, and their logits are not read).

    graphs = BatchGraphs(transformer, cache, max_rows=16)   # compiles, then captures buckets
    logits = graphs.step(seqs, tokens, positions)           # [len(seqs), vocab], static buffer

What changes from step to step is copied into each bucket's static inputs before the replay:
the tokens, the positions and the rows' block tables (kernels' own, stacked on the device),
and with kivi4 keys their open page slots.
Everything the forward pass reads is then a tensor the graph already knows
(kernels.PagedKVCache.write_rows and attend given `tables`). Only kernels' paged cache
(KernelsBatchCache) is captured; a step with a prompt chunk in it runs as this step for its
one-row sequences and the prefill graphs for each chunk (batch_chunks.py).
"""

from __future__ import annotations

import torch

from engine.hearth.batch_cache import KernelsBatchCache

BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def bucket_for(n_rows: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket holding n_rows."""
    for size in buckets:
        if size >= n_rows:
            return size
    raise ValueError(f"{n_rows} rows: the largest bucket is {buckets[-1]}")


def buckets_up_to(max_rows: int) -> tuple[int, ...]:
    """The buckets a batch of at most max_rows sequences needs (the last one holds them all)."""
    smaller = tuple(b for b in BUCKETS if b < max_rows)
    return (*smaller, max_rows)


class _StaticRows:
    """The cache view a captured step writes and attends through: the bucket's static block
    tables, open page slots (kivi4 keys) and positions, every row a decode row of its own."""

    def __init__(self, cache: KernelsBatchCache, bucket: _Bucket, stand_in: list[int]):
        self.cache, self.tables, self.slots = cache, bucket.tables, bucket.slots
        self.stand_in = stand_in

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self.cache.cache.write_rows(
            layer, self.stand_in, positions, k.to(torch.float16), v.to(torch.float16),
            tables=self.tables, slots=self.slots,
        )  # fmt: skip

    def attend(
        self, layer, q, positions, n_keys, *, scale: float, window: int = 0, sinks=None,
        masks=None,
    ):  # fmt: skip
        """Decode rows only: one query each, no prefill mask (`masks` unused)."""
        if sinks is not None:
            raise ValueError("attention sinks are attended eagerly (BatchGraphs.can_capture)")
        out = self.cache.cache.attend(
            layer, q.to(torch.float16), self.stand_in, scale=scale, window=window,
            positions=positions, tables=self.tables, slots=self.slots,
        )  # fmt: skip
        return out.to(q.dtype)


class _Bucket:
    def __init__(
        self, size: int, cache: KernelsBatchCache, scratch_table: torch.Tensor,
        scratch_slot: torch.Tensor,
    ):  # fmt: skip
        device = cache.device
        self.size = size
        self.tokens = torch.zeros(size, dtype=torch.long, device=device)
        self.positions = torch.zeros(size, dtype=torch.long, device=device)
        self.tables = scratch_table.repeat(size, 1)
        self.slots = scratch_slot.repeat(size)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None


class BatchGraphs:
    def __init__(self, model, cache: KernelsBatchCache, max_rows: int):
        if not self.can_capture(model, cache):
            raise ValueError("this model or cache decodes a batch eagerly")
        self.model, self.cache = model, cache
        self._table = model.device_embedding()
        # the spare rows' sequence: one page of its own, for as long as the graphs live
        self.scratch = cache.new_sequence()
        cache.grow(self.scratch, 1)
        self._stand_in = cache.kernel_sequence(self.scratch)
        scratch_table = cache.cache.block_table(self._stand_in).clone()[None]
        scratch_slot = cache.cache.open_slot(self._stand_in)
        self.buckets = {
            b: _Bucket(b, cache, scratch_table, scratch_slot) for b in buckets_up_to(max_rows)
        }
        device = cache.device
        pool = torch.cuda.graph_pool_handle()  # one pool: buckets never replay at once
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), torch.inference_mode():
            for bucket in self.buckets.values():  # compiles every kernel before the captures
                self._body(bucket)
        torch.cuda.current_stream(device).wait_stream(side)
        for bucket in self.buckets.values():
            bucket.graph = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(bucket.graph, pool=pool):
                bucket.logits = self._body(bucket)

    @staticmethod
    def can_capture(model, cache) -> bool:
        """kernels' paged cache, and no attention sinks (those are attended in torch from
        gathered rows, eagerly)."""
        return isinstance(cache, KernelsBatchCache) and not model.config.attn_sinks

    def _body(self, bucket: _Bucket) -> torch.Tensor:
        rows = _StaticRows(self.cache, bucket, [self._stand_in] * bucket.size)
        h = self.model.embed_on_device(self._table, bucket.tokens)
        return self.model.forward_embedded(h, bucket.positions, rows, n_keys=0, all_logits=True)

    def step(self, seqs: list[int], tokens, positions: list[int]) -> torch.Tensor:
        """One decode row per sequence (each grown for its position first): the logits
        [len(seqs), vocab], a static buffer valid until the next step. `tokens`: a list, or
        a tensor on the device (the spare rows then keep the tokens they had: any id will
        do for them)."""
        n = len(seqs)
        bucket = self.buckets[bucket_for(n, tuple(self.buckets))]
        pad = bucket.size - n
        if isinstance(tokens, torch.Tensor):
            bucket.tokens[:n].copy_(tokens)
        else:
            bucket.tokens.copy_(torch.tensor(tokens + [0] * pad), non_blocking=True)
        bucket.positions.copy_(torch.tensor(positions + [0] * pad), non_blocking=True)
        kernel = self.cache.cache
        kernel_seqs = [self.cache.kernel_sequence(s) for s in seqs] + [self._stand_in] * pad
        torch.stack([kernel.block_table(s) for s in kernel_seqs], out=bucket.tables)
        if kernel.kivi:
            torch.cat([kernel.open_slot(s) for s in kernel_seqs], out=bucket.slots)
        bucket.graph.replay()
        return bucket.logits[:n]

    def close(self) -> None:
        """The graphs go, and the scratch sequence's page back to the pool."""
        self.buckets = {}
        self.cache.free_sequence(self.scratch)
