"""Prefill chunks captured in CUDA graphs, one per (chunk length, key bucket), replayed when a
chunk of that shape comes again.

A 512-token prefill chunk of a 48-layer MoE model is some 1,500 launches and a few hundred torch
operators; launched one by one from Python they take the host 100-140 ms on the H200 machine
against 69 ms of kernels (benchmarks/prefill_profile.py, session 17): the GPU waits on the host.
Replayed from a graph, the chunk costs the host one launch.

    graphs = PrefillGraphs(model, cache)
    logits = graphs.forward(ids, positions, n_keys=end)   # as model.forward: [vocab], a copy

What a graph fixes: the chunk's length T (every operator's shape) and the slots its attention
reads. The slots are rounded up to a multiple of KEY_STEP (at most the cache's n_ctx), so
chunks whose last position falls in the same stretch share a graph: the mask hides every slot
past a query's position (TorchKVCache.attend, PagedCacheAdapter.attend), so reading up to
KEY_STEP - 1 more slots adds masked columns only, never a different answer. Token ids and
positions are the graph's static inputs, copied in before each replay; the cache's tensors are
the cache's own, so a replay writes K and V where an eager chunk would.

When: a shape's first chunk runs eagerly (it compiles the Triton kernels, builds cuBLAS and
cuDNN plans and makes every lazily made table, so nothing of that lands in the capture), its
second is captured and replayed, the later ones replayed. A capture does not run the kernels,
so capturing writes nothing to the cache. At most MAX_GRAPHS are kept, the least recently
used dropped first; they share one memory pool (they never replay at once), so the pool holds
one chunk's buffers for the largest shape captured, beside what the eager chunks leave in
torch's cache; chunks reading more than MAX_KEYS slots run eagerly, which bounds that pool to
a chunk's matrices and a short attention (the memory plan does not count it apart yet). A
capture that fails (an operator that reads a value back, say) leaves that shape eager for good.

Which models and caches: those whose decode step is captured (decode_graph.can_capture's
caches) and whose experts are all read in place on the device (experts in RAM read the routing
back to the host; experts on the CPU run as host functions sized per chunk).
"""

from __future__ import annotations

import os
from collections import OrderedDict

import torch

from engine.hearth.decode_graph import can_capture
from engine.hearth.forward import Transformer

ENV = "HEARTH_PREFILL_GRAPH"  # "0": every chunk launched eagerly (measurements, debugging)
KEY_STEP = 512  # a graph's attention reads the slots up to a multiple of this, masked past
# chunks reading more slots run eagerly: their attention's masks and gathered rows would stay
# in the graphs' pool beside what torch's own cache keeps of the eager chunks (the memory plan,
# engine/planner/hearth_memory.py, counts one prefill workspace), and their GPU time grows
# with the slots while the host's stays
MAX_KEYS = 4096
MAX_GRAPHS = 16  # graphs kept: each holds ~1,500 nodes' parameters in host and device memory


def prefill_graphs_wanted() -> bool:
    """Whether the worker (and the benchmarks that measure it) replays chunks from graphs."""
    return os.environ.get(ENV) != "0"


def keys_read(n_keys: int, n_ctx: int) -> int:
    """The slots a chunk that attends n_keys slots reads when replayed from a graph (and when
    run eagerly as its shape's first chunk): n_keys rounded up to KEY_STEP, at most n_ctx."""
    return min(n_ctx, -(-n_keys // KEY_STEP) * KEY_STEP)


class _Captured:
    def __init__(self, n_tokens: int, device: torch.device):
        self.tokens = torch.zeros(n_tokens, dtype=torch.long, device=device)
        self.positions = torch.zeros(n_tokens, dtype=torch.long, device=device)
        self.graph = torch.cuda.CUDAGraph()
        self.logits: torch.Tensor | None = None


class PrefillGraphs:
    def __init__(self, model: Transformer, cache, *, max_graphs: int = MAX_GRAPHS):
        if not self.can_capture(model, cache):
            raise ValueError("this model or cache runs its prefill chunks eagerly")
        self.model, self.cache = model, cache
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[tuple[int, int], _Captured] = OrderedDict()
        self._seen: set[tuple[int, int]] = set()  # shapes run eagerly once
        self._eager: set[tuple[int, int]] = set()  # shapes whose capture failed
        self._pool = torch.cuda.graph_pool_handle()

    @staticmethod
    def can_capture(model: Transformer, cache) -> bool:
        """A cache with fixed shapes (decode_graph.can_capture) on a GPU, and every layer's
        experts (if any) on the device, read in place (ops.PackedExperts or the plain ones)."""
        from engine.hearth.expert_offload import ExpertsOnCpu, RamExperts

        if model.ops.device.type != "cuda" or not can_capture(cache):
            return False
        return not any(
            layer.moe is not None and isinstance(layer.moe.experts, RamExperts | ExpertsOnCpu)
            for layer in model.layers
        )

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, *, n_keys: int):
        """model.forward(tokens, positions, cache, n_keys=n_keys) for a prefill chunk (tokens
        and positions [T] on the device): the last token's logits [vocab], the caller's own
        (a copy of the graph's buffer where the chunk was replayed)."""
        shape = (tokens.shape[0], keys_read(n_keys, self.cache.n_ctx))
        if shape[1] > MAX_KEYS:
            return self.model.forward(tokens, positions, self.cache, n_keys=n_keys)
        captured = self._graphs.get(shape)
        if captured is None and shape in self._seen and shape not in self._eager:
            captured = self._capture(shape)
        if captured is None:
            self._seen.add(shape)
            return self.model.forward(tokens, positions, self.cache, n_keys=shape[1])
        self._graphs.move_to_end(shape)
        captured.tokens.copy_(tokens, non_blocking=True)
        captured.positions.copy_(positions, non_blocking=True)
        captured.graph.replay()
        return captured.logits.clone()

    def _capture(self, shape: tuple[int, int]) -> _Captured | None:
        n_tokens, n_keys = shape
        captured = _Captured(n_tokens, self.model.ops.device)
        try:
            with torch.inference_mode(), torch.cuda.graph(captured.graph, pool=self._pool):
                captured.logits = self.model.forward(
                    captured.tokens, captured.positions, self.cache, n_keys=n_keys
                )
        except RuntimeError:
            self._eager.add(shape)
            return None
        self._graphs[shape] = captured
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        return captured
