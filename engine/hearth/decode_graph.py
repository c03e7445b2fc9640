"""One decode step of the Hearth engine captured in a CUDA graph and replayed for every token.

A decode step of an 8B model is some 400 kernels of a few microseconds each; launched one by
one from Python, the launches and not the GPU set the pace. Captured once, the whole step
(every layer, the output matrix, the greedy pick) is a single graph launch.

    step = DecodeGraph(model, cache, position=n_past)   # warms up (compiles), then captures
    logits = step(token, position)   # [vocab]: a static buffer, overwritten by the next call
    step.greedy                      # argmax of those logits, computed inside the graph

What stays outside the graph, and why:
- the token's embedding row: the table stays in host memory (as llama.cpp keeps it), so the
  row is dequantized on the host and copied into the graph's static input; the position is
  written into its static tensor on the device;
- sampling other than greedy: its penalty history and seeded generator live on the host, so
  it reads the static logits after the replay (engine/hearth/sampler.py).

The cache must be one whose decode step can be captured (`can_capture`): fixed shapes at every
step and positions read from the device, never from the host. Warming up and capturing write K
and V at `position`: slots a later step overwrites before any query can see them.
"""

from __future__ import annotations

import torch

from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache


def can_capture(cache) -> bool:
    """The plain cache (attention over all n_ctx slots, masked by position) and kernels' paged
    cache (its pages reserved at creation, its kernels' grids sized by the capacity, positions
    read on the device: engine/hearth/paged_cache.py) both decode with fixed shapes."""
    from engine.hearth.paged_cache import PagedCacheAdapter

    return isinstance(cache, TorchKVCache | PagedCacheAdapter)


class DecodeGraph:
    def __init__(self, model: Transformer, cache, *, position: int):
        if not can_capture(cache):
            raise ValueError(f"{type(cache).__name__} cannot be captured in a CUDA graph")
        device = model.ops.device
        self.model, self.cache = model, cache
        self._embedded = torch.zeros(1, model.config.n_embd, device=device)
        self._position = torch.full((1,), position, dtype=torch.long, device=device)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(2):  # compiles every Triton kernel before the capture
                self._run()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self.graph):
            self.logits, self.greedy = self._run()

    def _run(self) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.model.forward_embedded(
            self._embedded, self._position, self.cache, n_keys=self.cache.n_ctx
        )[0]
        return logits, torch.argmax(logits)

    def __call__(self, token: int, position: int) -> torch.Tensor:
        """Run the token at `position`; returns the static logits [vocab]."""
        # a copy from pageable host memory: done before the call returns, so the next token's
        # row can never overwrite this one's while the copy is in flight
        self._embedded.copy_(self.model.embed_host(token))
        self._position.fill_(position)
        self.graph.replay()
        return self.logits
