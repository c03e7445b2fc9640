"""The context of a Hearth model loaded for n_parallel > 1 (engine/runtime/hearth_batch.py's
decoder steps it): the batch cache of n_parallel sequences, one forward pass over any rows of
them, the warm-up that captures the decode and prefill graphs a batch step replays, and the
refusal of single-sequence calls (the batch decodes this model's requests together)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from engine.llama.driver import ContextInfo, EngineError
from engine.runtime import protocol as p
from engine.runtime.engine_api import StepOutput
from engine.runtime.hearth_driver import GRAPH_ENV

if TYPE_CHECKING:
    from engine.runtime.hearth_driver import HearthModel, HearthSampler


# the row counts of the batch warm-up's prompts (HearthBatchContext.warm_up)
WARM_UP_ROWS = (12, 16, 17, 23, 32, 47, 64, 95, 128, 191, 256, 383, 512)
# the row counts a prompt chunk is padded to (prefill_graph.rows_run): the warm-up captures
# each one's graph for a prompt's first chunk
CHUNK_ROWS = (16, 32, 64, 128, 256, 512)


class HearthBatchContext:
    """The context of a Hearth model loaded for n_parallel > 1: the batch cache, whose
    sequences HearthBatchedDecoder opens and closes. It decodes nothing by itself."""

    def __init__(self, model: HearthModel, params: p.ModelParams):
        import torch

        from engine.hearth.batch_cache import new_batch_cache
        from engine.hearth.cache_layout import PAGE_SIZE, CacheUnavailable, cache_layout
        from engine.hearth.page_pool import MAX_SEQUENCES, pages_for

        hearth = model.hearth
        self.model, self._torch = model, torch
        n_parallel = params.n_parallel
        if not 1 < n_parallel <= MAX_SEQUENCES:
            raise EngineError(
                f"The Hearth engine decodes at most {MAX_SEQUENCES} requests together; "
                f"{n_parallel} were asked for. Choose --parallel {MAX_SEQUENCES} or fewer."
            )
        n_ctx = params.n_ctx or hearth.config.n_ctx_train
        self.n_ctx_per_sequence = n_ctx // n_parallel
        if self.n_ctx_per_sequence < 2:
            raise EngineError(
                f"A context of {n_ctx} tokens leaves nothing for each of {n_parallel} "
                "requests. Choose a longer context or fewer parallel requests."
            )
        kernels_on_gpu = hearth.ops.name == "kernels" and hearth.device != "cpu"
        config = hearth.config
        try:
            layout = cache_layout(params.type_k, params.type_v, kernels_on_gpu=kernels_on_gpu)
            self.cache = new_batch_cache(
                layout, n_layer=config.n_layer, n_head_kv=config.n_head_kv,
                head_dim=config.head_dim,
                # one page and one sequence more: the CUDA graphs' scratch (batch_graph.py)
                n_pages=pages_for(self.n_ctx_per_sequence, PAGE_SIZE) * n_parallel + 1,
                device=hearth.device, max_sequences=n_parallel + 1,
            )  # fmt: skip
        except CacheUnavailable as exc:
            raise EngineError(str(exc)) from None
        except torch.OutOfMemoryError:
            raise EngineError(
                f"Not enough GPU memory for the KV cache of {n_parallel} requests of "
                f"{self.n_ctx_per_sequence} tokens. Try a shorter context, fewer parallel "
                "requests or a smaller cache type (rot4)."
            ) from None
        self.budget = max(1, min(params.n_ubatch, n_ctx))
        self.n_parallel = n_parallel
        # decode-only steps replayed from CUDA graphs per batch size (batch_graph.py), made
        # by warm_up; HEARTH_CUDA_GRAPH=0 decodes eagerly
        self._graphs = None
        # steps with a prompt chunk in it, run as parts replayed from graphs (batch_chunks.py)
        self._chunks = None
        self._use_graphs = hearth.device.startswith("cuda") and os.environ.get(GRAPH_ENV) != "0"
        self.info = ContextInfo(
            n_ctx=n_ctx,
            n_batch=max(1, min(params.n_batch, n_ctx)),
            flash_attn="off",
            backend_sampling=False,
            swa_full=True,
            n_outputs_max=n_parallel,
        )

    def forward(self, seqs: list[int], tokens, positions: list[int], logit_rows):
        """One step's rows through the model (rows of a sequence together); the logits of
        `logit_rows` [R, vocab]. `tokens`: a list, or a tensor on the model's device (a step
        launched ahead, whose input the device computed)."""
        from engine.hearth.host_values import on_device

        torch = self._torch
        hearth = self.model.hearth
        device = hearth.device
        decode_only = len(set(seqs)) == len(seqs)
        if self._graphs is not None and decode_only and list(logit_rows) == list(range(len(seqs))):
            return self._graphs.step(seqs, tokens, positions)
        if self._chunks is not None:
            return self._chunks.forward(seqs, tokens, positions, logit_rows)
        rows = self.cache.rows(seqs, positions)
        with torch.inference_mode():
            return hearth.transformer.forward(
                tokens if isinstance(tokens, torch.Tensor) else on_device(tokens, device),
                on_device(positions, device),
                rows,
                n_keys=0,
                logit_rows=on_device(list(logit_rows), device),
            )

    # The Context seam: this context's requests go through HearthBatchedDecoder.

    def decode(self, tokens: list[int]) -> StepOutput:
        raise EngineError(_THROUGH_THE_BATCH)

    def step(self, token: int) -> StepOutput:
        raise EngineError(_THROUGH_THE_BATCH)

    def check(self, tokens: list[int], position: int) -> list[StepOutput]:
        raise EngineError(_THROUGH_THE_BATCH)

    def prepare_checks(self, n_tokens: int) -> None:
        """Nothing: a batched context never checks (speculation is off with parallel
        requests)."""

    def new_sampler(self, sampling: p.SamplingParams) -> HearthSampler:
        from engine.runtime.hearth_driver import HearthSampler

        return HearthSampler(self.model, sampling)

    def clear(self) -> None:
        """The decoder closes its sequences as they end; the prefix index keeps their full
        pages for later prompts until the pool needs them."""

    def forget_from(self, position: int) -> bool:
        return False

    def first_cached_position(self) -> int:
        return -1

    def warm_up(self) -> None:
        """One token, then (on a GPU) the steps a server's requests make, through sequences
        opened and closed again, then the decode steps' graphs: dequantization on the CPU, the
        kernels' compilation on a GPU, before the first request rather than inside one.

        Triton compiles a kernel once per launch shape, and the kernels pick theirs by the
        step's row count (RoPE's heads a program, the dequantizing MMA's block of rows) and
        specialize a count that is a multiple of 16. So the prompts here climb a ladder of
        row counts from 12 to the step's budget, about 1.5 apart, both kinds in each power of
        two (WARM_UP_ROWS); then several prompts in one step (4, 6, 8, 16, 23 and 47: the output
        matrix's row counts: the rows GEMV's, a program a row's, and each block of rows the
        dequantizing MMA takes, at and off a multiple of 16; the decode graphs have 32 and
        64) and a prompt beside a one-token row (docs/server.md has the first clients' waits
        with and without them). Then, with the graphs, a prompt of each row count a chunk is
        padded to (CHUNK_ROWS), twice: the second captures that chunk's graph
        (batch_chunks.py), so a prompt's first chunk replays one."""
        from engine.runtime.hearth_driver import worker_ends_when_out_of_memory

        bos = self.model.tokenize("", add_special=True)[:1] or [0]
        steps: list[list[int]] = [[1]]
        if self.model.hearth.device != "cpu":
            steps += [[n] for n in WARM_UP_ROWS]
            steps += [[23] * 4, [24] * 4, [12] * 6, [12] * 8, [6] * 16, [1] * 23, [1] * 47]
            steps += [[1, 17]]
        with worker_ends_when_out_of_memory("warming up"):
            for lengths in steps:
                if self._fits_one_step(lengths):
                    self._warm_up_step(lengths, bos[0])
        if self._use_graphs and self._graphs is None:
            with worker_ends_when_out_of_memory("capturing the batch's decode steps"):
                self._capture()
        if self._chunks is not None:  # a prompt of each padded row count, twice: captured
            with worker_ends_when_out_of_memory("capturing the batch's prompt chunks"):
                for rows in CHUNK_ROWS:
                    if self._fits_one_step([rows]):
                        for _ in range(2):
                            self._warm_up_step([rows - 1], bos[0])

    def _fits_one_step(self, lengths: list[int]) -> bool:
        return (
            len(lengths) <= self.n_parallel
            and max(lengths) <= self.n_ctx_per_sequence
            and sum(lengths) <= self.budget
        )

    def _warm_up_step(self, lengths: list[int], token: int) -> None:
        """One step computing a prompt of each length, each in a sequence of its own, then
        the sequences closed."""
        seqs = [self.cache.new_sequence() for _ in lengths]
        try:
            rows, positions, last = [], [], []
            for seq, n in zip(seqs, lengths, strict=True):
                self.cache.grow(seq, n)
                rows += [seq] * n
                positions += range(n)
                last.append(len(rows) - 1)
            self.forward(rows, [token] * len(rows), positions, last)
        finally:
            for seq in seqs:
                self.cache.free_sequence(seq)

    def _capture(self) -> None:
        """The decode step's graphs for every batch size up to n_parallel, and the parts a step
        with a prompt chunk runs as (batch_chunks.py). A decode step that cannot be captured
        leaves the batch decoding eagerly, with a line saying why (slower, the same tokens); a
        chunk shape whose capture fails runs eagerly (prefill_graph.py keeps why)."""
        from engine.hearth.batch_chunks import BatchChunks
        from engine.hearth.batch_graph import BatchGraphs

        transformer = self.model.hearth.transformer
        if not BatchGraphs.can_capture(transformer, self.cache):
            return
        try:
            self._graphs = BatchGraphs(transformer, self.cache, self.n_parallel)
        except Exception as exc:  # the graphs are a speed-up: serving goes on without them
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
            print(
                f"hearth worker: the batch's decode steps were not captured in CUDA graphs "
                f"({type(exc).__name__}: {first_line}); decoding them eagerly",
                file=sys.stderr,
                flush=True,
            )
            self._use_graphs = False
            return
        if BatchChunks.can_capture(transformer, self.cache):
            self._chunks = BatchChunks(
                transformer, self.cache, self._graphs.step, self.n_ctx_per_sequence,
                max_rows=self.budget,
            )  # fmt: skip

    def synchronize(self) -> None:
        if self.model.hearth.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def state_bytes(self) -> int:
        return self.cache.nbytes if self.cache is not None else 0

    def close(self) -> None:
        if self._chunks is not None:
            self._chunks.close()
            self._chunks = None
        if self._graphs is not None:
            self._graphs.close()
            self._graphs = None
        self.cache = None


_THROUGH_THE_BATCH = (
    "This model is loaded for several requests at once: its requests are decoded together "
    "(the batch decoder), not one by one. Load it with --parallel 1 for single-sequence use."
)
