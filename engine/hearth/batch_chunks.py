"""A batch step with prompt chunks in it, run in parts that replay CUDA graphs.

The batch's decode graphs (batch_graph.py) take one row per sequence. A step with a prompt
chunk in it, launched operator by operator from Python, took 104-151 ms on an 8B model for 64
to 512 rows (H200, benchmarks/hearth_batch_decode.py --profile: docs/measurements/
2026-11-28-s14-call-4/batch-profile.txt): a first token's wait at one client, and a stall of
every reply being decoded when a client joins. So such a step runs in parts, each replayed:
- its one-row sequences (the decode rows, and a prompt's last token computed alone) as one
  step of the decode graphs, `decode_rows`;
- each prompt chunk through engine/hearth/prefill_graph.py's graphs (captured the second time
  a shape comes), on a view of the batch cache that shows the chunk's sequence
  (paged_cache.PagedSequenceView): the chunk padded to a power of two rows, the padding rows
  at the positions after it, where they write into the sequence's own last page (slots its
  next rows overwrite before anything attends them) or nowhere (past its pages); the chunk's
  attention reads the slots up to a multiple of 512, those past its pages as zeros, all of
  them past every query's position and masked.

A sequence's rows read only its own pages and rows, so the parts compute what one pass over
all the rows computes, up to the rounding of matrices taken by a different kernel at another
row count (as any step's row count decides).

    chunks = BatchChunks(transformer, cache, graphs.step, n_ctx_per_sequence, max_rows=512)
    logits = chunks.forward(seqs, tokens, positions, logit_rows)   # [len(logit_rows), vocab]
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.hearth.batch_cache import KernelsBatchCache, row_groups
from engine.hearth.paged_cache import PagedSequenceView
from engine.hearth.prefill_graph import PrefillGraphs, experts_in_place

# decode_rows(seqs, tokens, positions) -> logits [len(seqs), vocab]: one row per sequence
DecodeRows = Callable[[list[int], list[int], list[int]], torch.Tensor]


class BatchChunks:
    def __init__(
        self, model, cache: KernelsBatchCache, decode_rows: DecodeRows,
        n_ctx_per_sequence: int, *, max_rows: int,
    ):  # fmt: skip
        """`max_rows`: the step's token budget (no chunk is padded past it)."""
        self.model, self.cache, self.decode_rows = model, cache, decode_rows
        self.view = PagedSequenceView(cache.cache, n_ctx_per_sequence)
        self.prefill = PrefillGraphs(model, self.view, max_rows=max_rows)

    @staticmethod
    def can_capture(model, cache) -> bool:
        """kernels' paged cache on a GPU, no attention sinks (batch_graph.BatchGraphs), every
        layer's experts on the device (prefill_graph.PrefillGraphs), and keys other than
        kivi4 (whose open page a view cannot show: a kivi4 batch runs its chunks eagerly)."""
        from engine.hearth.batch_graph import BatchGraphs

        return (
            BatchGraphs.can_capture(model, cache)
            and model.ops.device.type == "cuda"
            and experts_in_place(model)
            and not cache.kivi
        )

    def forward(self, seqs: list[int], tokens, positions: list[int], logit_rows) -> torch.Tensor:
        """One step's rows (each sequence's together, grown for them first; a chunk's at
        consecutive positions): the logits of `logit_rows` [R, vocab], a chunk's only at its
        last row."""
        from engine.hearth.host_values import on_device

        groups = row_groups(seqs)
        singles = [a for _, a, b in groups if b - a == 1]
        wanted = list(logit_rows)
        inside = set(wanted) - {b - 1 for _, _, b in groups}
        if inside:
            raise ValueError(f"logits asked of rows {sorted(inside)}, inside a prompt chunk")
        if isinstance(tokens, torch.Tensor):  # (a step with a prompt is never launched ahead)
            tokens = tokens.tolist()
        rows: dict[int, torch.Tensor] = {}
        if singles:
            logits = self.decode_rows(
                [seqs[a] for a in singles], [tokens[a] for a in singles],
                [positions[a] for a in singles],
            )  # fmt: skip
            rows.update(zip(singles, logits, strict=True))
        for seq, a, b in groups:
            if b - a == 1:
                continue
            start = positions[a]
            if positions[a:b] != list(range(start, start + b - a)):
                raise ValueError(f"a chunk's positions must follow one another: {positions[a:b]}")
            self.view.show(self.cache.kernel_sequence(seq))
            chunk = on_device(tokens[a:b], self.view.cache.device)
            rows[b - 1] = self.prefill.forward(chunk, start).reshape(-1)
        return torch.stack([rows[r] for r in wanted])

    def close(self) -> None:
        """The view's sequence goes (the graphs hold no pages)."""
        self.view.close()
