"""Several generations decoded together on the Hearth engine: continuous batching.

The Hearth engine's implementation of the worker's batching plug point (engine/runtime/
batching.py picks it, and HearthBatchContext (hearth_batch_context.py), when the model is
loaded with n_parallel > 1; batched_decode.py is llama.cpp's): the same
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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.llama.driver import EngineError
from engine.runtime import protocol as p
from engine.runtime.batch_requests import BatchGeneration, BatchRequests
from engine.runtime.batch_schedule import plan_step
from engine.runtime.detokenizer import StreamingDetokenizer

if TYPE_CHECKING:
    from engine.runtime.hearth_batch_context import HearthBatchContext
    from engine.runtime.hearth_driver import HearthModel


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
