"""A speculative check of n tokens captured in a CUDA graph, one graph per n, replayed for every
check of that size.

A check (verify.py) runs every layer as many small kernels, each row computed as a decode
step computes it: launched one by one from Python, a check on the starter model is hundreds of
launches, where the captured decode step is one, and a check would cost several plain steps
for launches alone. Captured, the check is one launch, like a decode step;
it reads the same device-side inputs (token ids, positions) and writes each row's argmax on the
device, so only n token ids come back.

    graph = CheckGraph(model, cache, n, position=n_past)   # warms up, then captures
    logits, greedy = graph.run(tokens, position)           # [n, vocab] (static), [n] ints

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


class CheckGraph:
    def __init__(self, model: Transformer, cache, n: int, *, position: int):
        if not capturable(cache):
            raise ValueError(f"checks on {type(cache).__name__} cannot be captured")
        device = model.ops.device
        self.model, self.cache, self.n = model, cache, n
        self._table = model.device_embedding()
        self.tokens = torch.zeros(n, dtype=torch.long, device=device)
        self.positions = torch.arange(position, position + n, device=device)
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
        h = self.model.embed_on_device(self._table, self.tokens)
        logits = check_forward_embedded(self.model, self.cache, h, self.positions)
        greedy = torch.stack([torch.argmax(row) for row in logits])  # as a decode step picks
        self.host_greedy.copy_(greedy, non_blocking=True)
        return logits

    def run(self, tokens: list[int], position: int) -> tuple[torch.Tensor, list[int]]:
        """Check `tokens` (n of them) at positions position..; their logits [n, vocab] (a
        static buffer, valid until the next run) and greedy picks."""
        self.tokens.copy_(torch.tensor(tokens, dtype=torch.long), non_blocking=True)
        self.positions.copy_(
            torch.arange(position, position + self.n, dtype=torch.long), non_blocking=True
        )
        self.graph.replay()
        self.done.record()
        self.done.synchronize()
        return self.logits, self.host_greedy.tolist()
