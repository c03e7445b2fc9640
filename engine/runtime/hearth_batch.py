"""Several generations decoded together on the Hearth engine: continuous batching.

The Hearth engine's implementation of the worker's batching plug point (engine/runtime/
batching.py picks it, and HearthBatchContext, when the model is loaded with n_parallel > 1;
batched_decode.py is llama.cpp's): the same
calls (`submit`, `step` while `busy`, `request_stop` from the reader thread) and the same
events per request. Each generation owns a sequence of the batch cache
(engine/hearth/batch_cache.py): its own page table in one page pool, pages taken as it grows
and all given back the moment it ends, is stopped, or its client goes.

Shared prefixes: a generation's sequence starts from the longest prefix of its prompt that the
cache's prefix index holds (engine/hearth/page_pool.py: full pages keyed by their tokens and
everything before them, kept after their sequence ends while the pool has room), by
reference, and only the rest of the prompt is computed; after each step a sequence's full
pages go into the index. So concurrent clients with one system prompt, and a chat's next turn
(whose prompt starts with the previous turn's), compute the shared part once; the stats say
how many prompt tokens were taken from the cache (n_prompt_tokens_reused). Concurrent
requests arrive before the first of them has computed the shared part: a prompt whose next
page another running prompt is computing waits for it (a step or a few), then takes the pages
that prompt published instead of computing them again; prompts that share nothing never wait.

A step is a forward pass (engine/hearth/forward.py) over the rows that
batch_schedule.plan_step picks: one token for every decoding sequence, then chunks of the
prompts that joined, within the per-step token budget, so a long new prompt is computed
between the others' tokens instead of stalling them. Generations join and leave between
steps. A step's matrices take the GEMV or the dequantized matrix's GEMM by the step's row
count alone (KernelsOps._matmul_path), decode rows and prompt chunks alike. On a GPU a step
of decode rows alone replays the decode graphs (batch_graph.py), and a step with a prompt chunk
in it runs as parts replayed from graphs too: its one-row sequences as a decode step, each
chunk through the prefill graphs on a view of its sequence (batch_chunks.py); launched eagerly,
such a step took 104-151 ms on an 8B model for 64 to 512 rows.

Every row's token is drawn on the device, all rows at once, each by its own settings and seed
(engine/hearth/sampler.py sample_rows). Steps launched ahead: while no prompt waits to be
computed and no running generation needs its tokens on the host before its next draw (a
repeat penalty) or wants log-probabilities, a decode step is launched before the previous
one's tokens reach the host, its input those tokens where the device drew them; the host then
takes the previous step's tokens (their text, the stop checks, the next requests) while the
device computes. So the host's share of a step no longer leaves the GPU idle. A generation
that ends on a token its launched-ahead row was already decoding has that row's result
discarded (its pages go back at once; the row's write lands in a page no one else holds before
any later step's). The tokens are those of the steps one by one: the same draws from the same
logits.

Memory: the pool holds n_parallel sequences of n_ctx / n_parallel positions each (what the
planner budgets, engine/planner/hearth_memory.py), and a sequence stops at its share with
"context_full", so a running generation does not run out of pages; if one ever does, that
generation alone fails with the pool's message and no other sequence's pages are touched.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.llama.driver import ContextInfo, EngineError
from engine.runtime import protocol as p
from engine.runtime.batch_requests import BatchGeneration, BatchRequests
from engine.runtime.batch_schedule import plan_step
from engine.runtime.detokenizer import StreamingDetokenizer
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


@dataclass(eq=False)
class _Generation(BatchGeneration):
    seq: int | None = None  # its sequence in the batch cache, while it runs
    written: list[int] = field(default_factory=list)  # the tokens its sequence holds, in order
    n_cached: int = 0  # positions its sequence holds
    # its newest position decodes a token still on the device (a step launched ahead): that
    # token is not in `written` yet
    input_on_device: bool = False


@dataclass
class _Launched:
    """A decode step whose tokens the host has not taken: its rows' generations in row order,
    their greedy tokens on the device, and the same on their way to the host (`ready` is
    recorded after that copy; None on the CPU, where the step is done when launched)."""

    gens: list[_Generation]
    tokens: Any
    host: Any
    ready: Any

    def wait(self) -> list[int]:
        if self.ready is not None:
            self.ready.synchronize()
        return self.host.tolist()


class HearthBatchedDecoder(BatchRequests[_Generation]):
    # decode steps launched ahead of the last one's tokens (the module docstring); off, every
    # step waits for its tokens: what benchmarks/hearth_batch_decode.py measures it against
    launch_ahead = True

    def __init__(
        self, model: HearthModel, ctx: HearthBatchContext, n_parallel: int,
        send: Callable[[Any], None],
    ):  # fmt: skip
        self.model, self.ctx, self._send = model, ctx, send
        self.n_parallel = n_parallel
        self.n_ctx_per_sequence = ctx.n_ctx_per_sequence
        self._launched: _Launched | None = None
        super().__init__()

    def _new_generation(self, command: p.Generate, received_at: float, prompt: list[int]):
        return _Generation(command=command, received_at=received_at, prompt=prompt)

    def _n_cached(self, gen: _Generation) -> int:
        """Positions its sequence holds for the tokens the host has taken (a position grown
        for a step launched ahead is not counted: the stop checks see what a step at a time
        would)."""
        return gen.n_cached - gen.input_on_device

    def _release(self, gen: _Generation) -> None:
        """The generation's pages go back to the pool at once."""
        if gen.seq is not None and self.ctx.cache is not None:
            self.ctx.cache.free_sequence(gen.seq)
        gen.seq = None
        if gen.sampler is not None:
            gen.sampler.close()
            gen.sampler = None

    # -- from the main thread (the reader thread's calls: RequestQueue) -----------------------

    def cached_tokens(self) -> int:
        return sum(g.n_cached for g in self._running)

    def close(self) -> None:
        self._launched = None
        self.ctx.synchronize()  # no step still running on the graphs and pages given back
        self.stop_everything()

    def fail_everything(self, message: str) -> None:
        self._launched = None
        super().fail_everything(message)

    def step(self) -> None:
        """Admit what has a free sequence; take the tokens of the step launched last time
        (after launching the next one where it can go ahead); else run one forward pass over
        the planned rows and sample every sequence whose logits came out."""
        from engine.hearth.page_pool import PagesExhausted
        from engine.runtime.hearth_driver import worker_ends_when_out_of_memory

        self._honour_stops()
        self._admit()
        launched, self._launched = self._launched, None
        if launched is not None:
            self._launched = self._launch_ahead(launched)
            self._take_launched(launched)
            if self._launched is not None:
                return
        if not self._running:
            return
        by_key = {g.request_id: g for g in self._running}
        plan = plan_step(
            [g.request_id for g in self._running if g.next_token is not None],
            self._prompts_to_compute(),
            self.ctx.budget,
        )
        seqs, tokens, positions, sampled, stepped = [], [], [], [], []
        for work in plan:
            gen = by_key[work.key]
            chunk = [gen.next_token] if gen.next_token is not None else gen.todo[: work.n_tokens]
            try:
                start = self.ctx.cache.grow(gen.seq, len(chunk))
            except PagesExhausted as exc:
                self._release(gen)
                self._running.remove(gen)
                self._fail(gen, str(exc))
                continue
            if gen.next_token is not None:
                gen.next_token = None
            else:
                gen.todo = gen.todo[len(chunk) :]
            gen.n_cached = start + len(chunk)
            gen.written += chunk
            stepped.append(gen)
            seqs += [gen.seq] * len(chunk)
            tokens += chunk
            positions += range(start, start + len(chunk))
            if work.samples:
                sampled.append((gen, len(tokens) - 1))
        if not tokens:
            return
        with worker_ends_when_out_of_memory("decoding a batch"):
            logits = self.ctx.forward(seqs, tokens, positions, [row for _, row in sampled])
        for gen in stepped:  # their full pages, now written, for later prompts to share
            self.ctx.cache.publish(gen.seq, gen.written)
        gens = [gen for gen, _ in sampled]
        if self.launch_ahead and len(gens) == len(tokens) and all(map(_drawn_alone, gens)):
            self._launched = self._launch(gens, logits)  # taken by the next step
            return
        entries = [
            self._logprob_entry_of(logits[i], gen.command.top_logprobs)
            if gen.top_logprobs_wanted else None
            for i, gen in enumerate(gens)
        ]  # fmt: skip
        drawn = self._draw(gens, logits).tolist()  # one read for every row
        for gen, token, entry in zip(gens, drawn, entries, strict=True):
            gen.sampler.accept(token)
            self._take_token(gen, token, entry)

    # -- steps launched ahead -----------------------------------------------------------------

    def _draw(self, gens: list[_Generation], logits):
        """Every generation's next token from its row of `logits`, drawn together on the
        device by each one's settings (engine.hearth.sampler.sample_rows)."""
        from engine.hearth.sampler import sample_rows

        return sample_rows(logits, [gen.sampler.next_draw() for gen in gens])

    def _launch(self, gens: list[_Generation], logits) -> _Launched:
        """The step whose `logits` (one row per generation) are being computed, left running:
        its drawn tokens go to the host behind it."""
        torch = self.ctx._torch
        tokens = self._draw(gens, logits)
        if tokens.device.type != "cuda":
            return _Launched(gens, tokens, tokens, None)
        host = torch.empty(tokens.shape, dtype=tokens.dtype, pin_memory=True)
        host.copy_(tokens, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record()
        return _Launched(gens, tokens, host, ready)

    def _launch_ahead(self, launched: _Launched) -> _Launched | None:
        """The next decode step, launched before `launched`'s tokens reach the host, its input
        those tokens on the device: for the generations drawn on the device alone that go on
        after their next token whatever it is (a token can end one only by its text: that
        row's result is then discarded). None where a prompt waits to be computed (a step with
        it comes next) or no generation can go ahead."""
        from engine.hearth.host_values import on_device
        from engine.hearth.page_pool import PagesExhausted
        from engine.runtime.hearth_driver import worker_ends_when_out_of_memory

        in_step = {id(g) for g in launched.gens}
        if any(g.todo or id(g) not in in_step for g in self._running):
            return None
        running = {id(g) for g in self._running}
        rows, gens, positions = [], [], []
        for i, gen in enumerate(launched.gens):
            if id(gen) not in running or not self._goes_on(gen):
                continue
            try:
                start = self.ctx.cache.grow(gen.seq, 1)
            except PagesExhausted:  # the next step a step at a time says so, for it alone
                continue
            gen.n_cached, gen.input_on_device = start + 1, True
            rows.append(i)
            gens.append(gen)
            positions.append(start)
        if not gens:
            return None
        tokens = launched.tokens
        if len(rows) < len(launched.gens):
            tokens = tokens[on_device(rows, tokens.device)]
        with worker_ends_when_out_of_memory("decoding a batch"):
            logits = self.ctx.forward(
                [g.seq for g in gens], tokens, positions, list(range(len(gens)))
            )
        return self._launch(gens, logits)

    def _goes_on(self, gen: _Generation) -> bool:
        """Whether a generation decodes another step after its next token, unless that token's
        text ends it (the end of generation, a stop string)."""
        return (
            _drawn_alone(gen)
            and gen.n_generated + 1 < gen.command.max_tokens
            and gen.n_cached + 1 < self.n_ctx_per_sequence
        )

    def _take_launched(self, launched: _Launched) -> None:
        """The launched step's tokens, each to its generation (unless it has ended meanwhile);
        one whose next step already runs keeps its token in `written` instead of decoding it
        again."""
        running = {id(g) for g in self._running}
        for gen, token in zip(launched.gens, launched.wait(), strict=True):
            if id(gen) not in running:
                continue
            gen.sampler.accept(token)
            self._take_token(gen, token)
            if gen.input_on_device:
                gen.input_on_device = False
                if gen.seq is not None:  # still running: the launched-ahead step decodes it
                    gen.next_token = None
                    gen.written.append(token)
                    self.ctx.cache.publish(gen.seq, gen.written)

    # -- the step's parts ---------------------------------------------------------------------

    def _prompts_to_compute(self) -> list[tuple[int, int]]:
        """(request, prompt tokens left) of the prompts this step may compute, in arrival
        order. One that has computed nothing yet first takes the longest indexed prefix (the
        index grows as earlier prompts publish their pages); one whose next page an earlier
        prompt is computing waits, so a shared prefix is computed once."""
        size = self.ctx.cache.page_size
        computing: set[tuple[int, ...]] = set()
        out = []
        for gen in self._running:
            if not gen.todo:
                continue
            if len(gen.written) == gen.n_reused:
                self._take_longer_prefix(gen)
            # the prompt up to the end of the page this generation computes next
            upto = tuple(gen.prompt[: (len(gen.written) // size + 1) * size])
            if upto in computing:
                continue
            computing.add(upto)
            out.append((gen.request_id, len(gen.todo)))
        return out

    def _take_longer_prefix(self, gen: _Generation) -> None:
        """A generation that has computed nothing: if the index now holds more of its prompt
        than its sequence started with, it starts again from that."""
        cache = self.ctx.cache
        _, n = cache.pool.match(gen.prompt, limit=len(gen.prompt) - 1)
        if n <= gen.n_reused:
            return
        cache.free_sequence(gen.seq)
        gen.seq = cache.new_sequence(gen.prompt, limit=len(gen.prompt) - 1)
        self._start_prompt(gen)

    def _start_prompt(self, gen: _Generation) -> None:
        gen.n_reused = gen.n_cached = self.ctx.cache.length(gen.seq)
        gen.written = list(gen.prompt[: gen.n_reused])
        gen.todo = list(gen.prompt[gen.n_reused :])

    def _admit(self) -> None:
        from engine.hearth.page_pool import PagesExhausted

        while self._waiting and len(self._running) < self.n_parallel:
            gen = self._waiting.popleft()
            try:
                gen.sampler = self.ctx.new_sampler(gen.command.sampling)
                # the last prompt token is always computed: its logits give the first token
                gen.seq = self.ctx.cache.new_sequence(gen.prompt, limit=len(gen.prompt) - 1)
            except (EngineError, PagesExhausted, ValueError) as exc:
                self._release(gen)
                self._fail(gen, str(exc))
                continue
            self._start_prompt(gen)
            gen.detok = StreamingDetokenizer(gen.command.stop)
            gen.prefill_started = time.perf_counter()
            self._running.append(gen)

    def _logprob_entry_of(self, logits, n_top: int):
        """The log-probability entry maker for `logits`, before sampling changes them."""
        torch = self.ctx._torch
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        values, ids = torch.topk(logprobs, n_top) if n_top > 0 else (logprobs[:0], logprobs[:0])
        return self._logprob_entry(logprobs, list(zip(ids.tolist(), values.tolist(), strict=True)))


def _drawn_alone(gen: _Generation) -> bool:
    """Its token is drawn on the device from its logits alone (no repeat penalty, whose
    tokens before it are on the host) and nothing more is wanted of them."""
    return not gen.sampler.penalizes and not gen.top_logprobs_wanted
