"""A speculative check of up to n tokens captured in a CUDA graph, one graph per size n, replayed
for every check of that size or less.

A check (verify.py) runs every layer as many small kernels, each row computed as a decode
step computes it: launched one by one from Python, a check on the starter model is hundreds of
launches, where the captured decode step is one, and a check would cost several plain steps
for launches alone. Captured, the check is one launch, like a decode step; it reads its inputs
(token ids and the first position) from the device in one copy, and writes each row's argmax
on the device, so only n token ids come back.

    graph = CheckGraph(model, cache, n, position=n_past)   # warms up, then captures
    logits, greedy = graph.run(tokens, position)           # [len(tokens), vocab] (static), ints

Sizes: the driver keeps graphs of `bucket(n)` rows (powers of two), and a check of fewer tokens
replays the next size up with its last token repeated in the rows past them. Every row is
computed as a decode step at its own position, whatever the rows after it hold (the matrices
row by row, attention masked by position), so the padding changes no bit of the rows asked
for; it writes K and V past them, which no query sees before a later step overwrites them
(attention masks by position). A reply's checks then meet a few graphs, all captured when
speculation starts (HearthContext.prepare_checks), never one per draft length inside a reply:
a draft shortened near the reply's end (a new size) captured a graph in the middle of the
timed reply, which is where the H200's rewrite pairs spread from 0.26x to 1.87x.

Warming up and capturing write K and V at positions position..position+n-1, which the check
that follows overwrites (and which no query sees before that: attention masks by position).
That is why a cache that seals pages as they fill (kivi4 keys) is not captured: a warm-up
crossing a page's end would seal it from rows that are not the history (`capturable`).
"""

from __future__ import annotations

import torch

from engine.hearth.decode_graph import can_capture
from engine.hearth.forward import Transformer
from engine.hearth.verify import check_forward_embedded


def capturable(cache) -> bool:
    """A cache whose checks can be captured: fixed shapes (decode_graph.can_capture) and any
    row may be written ahead of the history (no page sealed by a write: rows_checkable)."""
    return can_capture(cache) and cache.rows_checkable(0) >= cache.n_ctx


def bucket(n: int) -> int:
    """The rows of the graph that checks n tokens: the power of two from n up (2 at least).
    The decode loop drafts 1, 3, 7 or 15 tokens on a GPU (draft_length.fixed_shape_lengths),
    checks of 2, 4, 8 and 16 rows: each its own graph, unpadded."""
    return max(2, 1 << (n - 1).bit_length())


class CheckGraph:
    def __init__(self, model: Transformer, cache, n: int, *, position: int):
        if not capturable(cache):
            raise ValueError(f"checks on {type(cache).__name__} cannot be captured")
        device = model.ops.device
        self.model, self.cache, self.n = model, cache, n
        self._table = model.device_embedding()
        # the inputs as one copy: n token ids, then the first row's position
        self.host_inputs = torch.zeros(n + 1, dtype=torch.long, pin_memory=True)
        self._host_view = self.host_inputs.numpy()  # filled in place: no tensor per check
        self.inputs = torch.zeros(n + 1, dtype=torch.long, device=device)
        self.inputs[n] = position
        self._rows = torch.arange(n, dtype=torch.long, device=device)
        self.host_greedy = torch.zeros(n, dtype=torch.long, pin_memory=True)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(2):  # compiles every Triton kernel before the capture
                self._body()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self.graph):
            self.logits = self._body()
        self.done = torch.cuda.Event()

    def _body(self) -> torch.Tensor:
        tokens = self.inputs[: self.n]
        positions = self.inputs[self.n] + self._rows
        h = self.model.embed_on_device(self._table, tokens)
        logits = check_forward_embedded(self.model, self.cache, h, positions)
        # each row's first maximum, as a decode step's torch.argmax of its row picks: an argmax
        # does no arithmetic, so one launch over the rows picks the same tokens as one a row
        greedy = torch.argmax(logits, dim=-1)
        self.host_greedy.copy_(greedy, non_blocking=True)
        return logits

    def run(self, tokens: list[int], position: int) -> tuple[torch.Tensor, list[int]]:
        """Check `tokens` (n of them or fewer: the rest padded with the last) at positions
        position..; their logits [len(tokens), vocab] (a static buffer, valid until the next
        run) and greedy picks. The caller leaves room for n rows in the cache."""
        used = len(tokens)
        if not 0 < used <= self.n:
            raise ValueError(f"{used} tokens for a check graph of {self.n}")
        host = self._host_view  # the last copy from it has ended: the last run synchronized
        host[:used] = tokens
        host[used : self.n] = tokens[-1]
        host[self.n] = position
        self.inputs.copy_(self.host_inputs, non_blocking=True)
        self.graph.replay()
        self.done.record()
        self.done.synchronize()
        return self.logits[:used], self.host_greedy[:used].tolist()
