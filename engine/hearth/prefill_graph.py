"""Prompt chunks replayed from CUDA graphs, one per (rows, key count), each captured the second
time a chunk of its shape comes.

A 512-token prefill chunk of a 48-layer MoE model is some 1,500 launches and a few hundred torch
operators; launched one by one from Python they take the host 100-140 ms on the H200 machine
against 69 ms of kernels (docs/measurements/2026-11-29-s17-call-2/prefill-qwen3.txt): the GPU
waits on the host. Replayed from a graph, the chunk costs the host a graph launch and three
small copies.

    graphs = PrefillGraphs(model, cache)
    logits = graphs.forward(ids, start)   # ids [T] at positions start..: the last one's [vocab]

What a graph fixes is every operator's shape: the chunk's rows and the slots its attention
reads. So that chunks of other lengths and places share graphs:
- rows: the T tokens are padded to the next power of two (at least MIN_ROWS, at most the
  prompt's chunk size: the memory plan counts a chunk's buffers at that many rows), the padding
  rows at the positions after the chunk's (start+T..), where they write K and V into slots no query
  sees before the tokens of those positions overwrite them (a later chunk, or a decode step,
  writes its rows before it attends: decode_graph.py's launch-ahead rests on the same rule);
  the logits are the last real row's (`logit_rows`). Where the cache has no room for the
  padding, or where a padding row would seal a page from rows that are not the history (kivi4
  keys: the cache's rows_checkable), the chunk keeps its T rows.
- keys: the slots read are rounded up to a multiple of KEY_STEP (at most n_ctx): the mask hides
  every slot past a query's position (TorchKVCache.attend, PagedCacheAdapter.attend), so the
  slots read past the chunk are masked columns, never a different answer.
A shape's first chunk runs the padded forward eagerly (it compiles the Triton kernels, builds
the cuBLAS and cuDNN plans and makes the lazily made tables, so none of that lands in a
capture); its second is captured, then replayed, and so are the later ones. A capture runs no
kernel, so capturing writes nothing to the cache; the graph's inputs (token ids, positions,
the last row) are static tensors filled before each replay, the cache's tensors its own.

At most MAX_GRAPHS are kept, the least recently used dropped first. They share one memory pool
(they never replay at once): it holds one chunk's buffers at the largest shape captured,
beside what the eager chunks leave in torch's cache. Chunks reading more than MAX_KEYS slots
run eagerly, unpadded, which bounds that pool to a chunk's matrices and a short attention (the
memory plan, engine/planner/hearth_memory.py, does not count it apart yet). A capture that
fails is tried once more with SDPA held to its memory-efficient kernel (torch takes cuDNN's
attention on the H200; whether cuDNN's captures is unmeasured; `attention_backends` says where
that retry was taken and why); one that fails again (an operator that reads a value back, say)
leaves that shape eager for good, the reasons kept in `failures`.

Which models and caches (`can_capture`): those whose decode step is captured
(decode_graph.can_capture's caches), on a GPU, with every layer's experts (if any) read in
place on the device (experts in RAM read the routing back to the host; experts on the CPU run
as host functions).
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict

import torch

from engine.hearth.decode_graph import can_capture
from engine.hearth.forward import Transformer

ENV = "HEARTH_PREFILL_GRAPH"  # "0": every chunk launched eagerly (measurements, debugging)
KEY_STEP = 512  # a graph's attention reads the slots up to a multiple of this, masked past
MIN_ROWS = 16  # the fewest rows a chunk is padded to (a multiple of 16, as Triton specializes)
# chunks reading more slots run eagerly: their attention's masks and gathered rows would stay
# in the graphs' pool beside what torch's own cache keeps of the eager chunks, and their GPU
# time grows with the slots while the host's stays
MAX_KEYS = 4096
MAX_GRAPHS = 24  # graphs kept: each holds ~1,500 nodes' parameters in host and device memory


def prefill_graphs_wanted() -> bool:
    """Whether the worker (and the benchmarks that measure it) replays chunks from graphs."""
    return os.environ.get(ENV) != "0"


def experts_in_place(model: Transformer) -> bool:
    """No layer's experts in RAM (whose routing is read back to the host) or computed by the
    CPU (a host function per chunk): what a chunk's capture needs of a MoE model."""
    from engine.hearth.expert_offload import ExpertsOnCpu, RamExperts

    return not any(
        layer.moe is not None and isinstance(layer.moe.experts, RamExperts | ExpertsOnCpu)
        for layer in model.layers
    )


def keys_read(n_keys: int, n_ctx: int) -> int:
    """The slots a chunk that attends n_keys slots reads in its graph (and as its shape's
    first, eager chunk): n_keys rounded up to KEY_STEP, at most n_ctx."""
    return min(n_ctx, -(-n_keys // KEY_STEP) * KEY_STEP)


def rows_run(n_tokens: int, start: int, cache, max_rows: int | None = None) -> int:
    """The rows a chunk of n_tokens at `start` runs as: the next power of two (at least
    MIN_ROWS, at most `max_rows`: the prompt's chunk size, whose buffers the memory plan
    counts) where the cache has room for the padding rows and takes them ahead of the
    history, else n_tokens."""
    rows = max(MIN_ROWS, 1 << (n_tokens - 1).bit_length())
    if max_rows is not None:
        rows = max(n_tokens, min(rows, max_rows))
    # rows_checkable: how many rows from `start` may be written ahead of the history (to the
    # cache's end; kivi4 keys: short of the slot that seals the page)
    return rows if rows <= cache.rows_checkable(start) else n_tokens


class _Inputs:
    """A shape's static inputs: token ids and positions [rows], the last real row [1]."""

    def __init__(self, rows: int, device: torch.device):
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, dtype=torch.long, device=device)
        self.last = torch.zeros(1, dtype=torch.long, device=device)

    def fill(self, tokens: torch.Tensor, start: int) -> None:
        """The chunk's ids (the padding rows keep the ids they had: any id will do), its
        positions and those after it, and its last row."""
        n = tokens.shape[0]
        self.tokens[:n].copy_(tokens, non_blocking=True)
        torch.arange(start, start + self.tokens.shape[0], out=self.positions)
        self.last.fill_(n - 1)


class _Captured:
    def __init__(self, inputs: _Inputs):
        self.inputs = inputs
        self.graph = torch.cuda.CUDAGraph()
        self.logits: torch.Tensor | None = None


class PrefillGraphs:
    def __init__(
        self, model: Transformer, cache, *, max_rows: int | None = None,
        max_graphs: int = MAX_GRAPHS,
    ):  # fmt: skip
        """`max_rows`: the prompt's chunk size (no chunk is padded past it; None: no bound)."""
        self.model, self.cache = model, cache
        self.max_rows, self.max_graphs = max_rows, max_graphs
        self._graphs: OrderedDict[tuple[int, int], _Captured] = OrderedDict()
        self._seen: set[tuple[int, int]] = set()  # shapes run eagerly once
        self.failures: dict[tuple[int, int], str] = {}  # shapes whose capture failed: why
        # shapes captured with SDPA's memory-efficient (or math) kernel, after the capture with
        # torch's own choice (cuDNN's on the H200) failed: why that one failed
        self.attention_backends: dict[tuple[int, int], str] = {}
        self._failed: list[torch.cuda.CUDAGraph] = []  # failed captures' graphs (_clean_up_failed)
        self._pool = None

    @staticmethod
    def can_capture(model: Transformer, cache) -> bool:
        """A cache with fixed shapes (decode_graph.can_capture) on a GPU, and every layer's
        experts (if any) on the device, read in place."""
        return model.ops.device.type == "cuda" and can_capture(cache) and experts_in_place(model)

    def forward(self, tokens: torch.Tensor, start: int) -> torch.Tensor:
        """The chunk `tokens` [T] (on the device) at positions start..start+T-1, its K and V
        written into the cache: the last token's logits [vocab], the caller's own (as
        model.forward(tokens, positions, cache, n_keys=start + T) gives them)."""
        n_tokens = tokens.shape[0]
        rows = rows_run(n_tokens, start, self.cache, self.max_rows)
        shape = (rows, keys_read(start + rows, self.cache.n_ctx))
        if shape[1] > MAX_KEYS:
            positions = torch.arange(start, start + n_tokens, device=tokens.device)
            return self.model.forward(tokens, positions, self.cache, n_keys=start + n_tokens)
        captured = self._graphs.get(shape)
        if captured is None and shape in self._seen and shape not in self.failures:
            captured = self._capture(shape)
        if captured is None:
            self._seen.add(shape)
            inputs = _Inputs(rows, tokens.device)
            inputs.fill(tokens, start)
            return self._chunk(inputs, shape[1])
        self._graphs.move_to_end(shape)
        captured.inputs.fill(tokens, start)
        captured.graph.replay()
        return captured.logits.clone()

    def _chunk(self, inputs: _Inputs, n_keys: int) -> torch.Tensor:
        return self.model.forward(
            inputs.tokens, inputs.positions, self.cache, n_keys=n_keys, logit_rows=inputs.last
        )[0]

    def _captured(self, shape: tuple[int, int], backends) -> tuple[_Captured | None, str]:
        """The chunk of `shape` captured (SDPA limited to `backends`, None: torch's choice),
        or None and why not."""
        from torch.nn.attention import sdpa_kernel

        rows, n_keys = shape
        captured = _Captured(_Inputs(rows, self.model.ops.device))
        stream = torch.cuda.current_stream()
        limited = sdpa_kernel(backends) if backends else contextlib.nullcontext()
        try:
            with (
                limited,
                torch.inference_mode(),
                torch.cuda.graph(captured.graph, pool=self._pool),
            ):
                captured.logits = self._chunk(captured.inputs, n_keys)
        except RuntimeError as exc:
            self._clean_up_failed(captured, stream)
            return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return captured, ""

    def _clean_up_failed(self, captured: _Captured, stream) -> None:
        """After a failed capture: torch's CUDAGraph.capture_end raises at the failed
        cudaStreamEndCapture before torch.cuda.graph puts the stream back, and before it ends
        the caching allocator's recording into the pool (torch 2.11), which would refuse the
        pool to the next capture and ask every later allocation whether it is captured. Both
        are undone here (the recording as torch.cuda.use_mem_pool ends its own); the graph is
        kept, since the allocators' recording filters refer to it."""
        torch.cuda.set_stream(stream)
        # (it raises where the failure came before the recording began, or after it ended)
        with contextlib.suppress(RuntimeError):
            torch._C._cuda_endAllocateToPool(torch.cuda.current_device(), self._pool)
        self._failed.append(captured.graph)
        # and the next capture records into a pool of its own: on an H200 with torch 2.11 the
        # call above left the pool recording ("beginAllocateToPool: already recording to
        # mempool_id" at the next capture), so every later shape ran eagerly
        self._pool = torch.cuda.graph_pool_handle()

    def _capture(self, shape: tuple[int, int]) -> _Captured | None:
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        captured, why = self._captured(shape, None)
        if captured is None:  # again without cuDNN's attention, should it be what failed
            from torch.nn.attention import SDPBackend

            backends = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
            captured, why_again = self._captured(shape, backends)
            if captured is None:
                self.failures[shape] = f"{why}; without cuDNN's attention: {why_again}"
                return None
            self.attention_backends[shape] = "efficient/math: " + why
        self._graphs[shape] = captured
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        return captured
