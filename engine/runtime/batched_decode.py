"""Several generations decoded together: one llama_decode per step for every active sequence.

The single-sequence loop (generation.py) serves the window's chat; this one serves concurrent
API requests (and the window's chat beside them) when the model is loaded with n_parallel > 1.
Each generation has its own sequence id in the shared KV cache (kv_slots.py), its own sampler
chain and its own detokenizer. A step puts into one batch the last sampled token of every
decoding sequence plus as much of the joining prompts as the batch has room for, decodes once,
then samples each sequence from its own row of logits. New generations join between steps, and
a stopped one leaves between steps, freeing its place at once.

The worker calls `submit` for each Generate, `step` while `busy`, and `request_stop` from its
reader thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.enums import StopReason, WorkLimit
from engine.llama.batch import SequenceBatch
from engine.llama.driver import Context, EngineError, Model
from engine.llama.sampler import GrammarTooSlow, Sampler
from engine.runtime import protocol as p
from engine.runtime.detokenizer import StreamingDetokenizer
from engine.runtime.kv_slots import Slot, SlotTable
from engine.runtime.request_queue import RequestQueue
from engine.runtime.to_llama import sampler_settings


@dataclass
class _Generation:
    command: p.Generate
    received_at: float
    prompt: list[int]
    sampler: Sampler | None = None
    detok: StreamingDetokenizer | None = None
    slot: Slot | None = None
    todo: list[int] = field(default_factory=list)  # prompt tokens still to compute
    next_token: int | None = None  # sampled, decoded in the next step
    reused: int = 0
    n_generated: int = 0
    prefill_started: float = 0.0
    first_token_at: float = 0.0
    last_token_at: float = 0.0
    logprobs: list[p.TokenLogprob] = field(default_factory=list)

    @property
    def request_id(self) -> int:
        return self.command.request_id

    @property
    def top_logprobs_wanted(self) -> bool:
        return self.command.top_logprobs >= 0


class BatchedDecoder(RequestQueue[_Generation]):
    def __init__(self, model: Model, ctx: Context, n_parallel: int, send: Callable[[Any], None]):
        self.model, self.ctx, self._send = model, ctx, send
        self.slots = SlotTable(n_parallel, ctx.info.n_ctx)
        # Each sequence may use its share of the cache, so one long request cannot starve
        # the others; cells left over (by short requests) are what prefix sharing saves.
        self.n_ctx_per_sequence = ctx.info.n_ctx // n_parallel
        self._batch = SequenceBatch(ctx.info.n_batch)
        super().__init__()

    # -- from the main thread (the reader thread's calls: RequestQueue) -----------------------

    def cached_tokens(self) -> int:
        return sum(len(s.cached) for s in self.slots.slots)

    def submit(self, command: p.Generate, received_at: float, prompt: list[int]) -> None:
        if not prompt:
            raise EngineError("The prompt is empty.")
        if len(prompt) >= self.n_ctx_per_sequence:
            raise EngineError(
                f"The prompt is {len(prompt)} tokens long but each of the "
                f"{len(self.slots.slots)} parallel sequences holds {self.n_ctx_per_sequence}. "
                "Shorten it, or load the model with a longer context."
            )
        # A "stop everything" asked before this request arrived is for the others only.
        self._honour_stops()
        self._waiting.append(_Generation(command=command, received_at=received_at, prompt=prompt))

    def stop_everything(self) -> None:
        """End every generation now (a new model is loading)."""
        for gen in list(self._running):
            self._finish(gen, StopReason.STOPPED)
        while self._waiting:
            self._finish(self._waiting.popleft(), StopReason.STOPPED)

    def fail_everything(self, message: str) -> None:
        """llama.cpp failed a step: every generation ends with the reason, and the cache is
        cleared so the next one starts from a known state."""
        for gen in list(self._running) + list(self._waiting):
            if gen.slot is not None:
                self.slots.release(gen.slot)
            if gen.sampler is not None:
                gen.sampler.close()
            self._fail(gen, message)
        self._running.clear()
        self._waiting.clear()
        self.ctx.clear()
        for slot in self.slots.slots:
            self.slots.truncate(slot, 0)

    def step(self) -> None:
        """Admit what fits, decode one batch, sample every sequence that produced logits."""
        self._honour_stops()
        self._admit()
        if not self._running:
            return
        snapshot = [(g, len(g.slot.cached), g.next_token, g.todo) for g in self._running]
        outputs = self._fill_batch()
        rc = self._batch.decode(self.ctx)
        if rc == 1:
            self._cache_full(snapshot)
            return
        for gen, index in outputs:
            self._sample(gen, index)

    def close(self) -> None:
        self.stop_everything()
        for slot in self.slots.slots:
            slot.cached.clear()
        self._batch.close()

    # -- the step's parts ---------------------------------------------------------------------

    def _honour_stops(self) -> None:
        stop_all, ids = self.take_stops()
        if not (stop_all or ids):
            return
        for gen in [g for g in self._running if stop_all or g.request_id in ids]:
            self._finish(gen, StopReason.STOPPED)
        for gen in [g for g in self._waiting if stop_all or g.request_id in ids]:
            self._waiting.remove(gen)
            self._finish(gen, StopReason.STOPPED)

    def _admit(self) -> None:
        while self._waiting:
            gen = self._waiting[0]
            computing = {g.slot.seq: g.prompt for g in self._running if g.todo}
            if computing and self.slots.prefix_in_progress(gen.prompt, computing):
                return  # admitted next step, sharing the prefix once it is computed
            max_new = min(gen.command.max_tokens, self.n_ctx_per_sequence - len(gen.prompt))
            admission = self.slots.plan(gen.prompt, max_new)
            if admission is None:
                if not self._running:  # nothing will free cells: it can never fit
                    self._waiting.popleft()
                    self._fail(gen, "The prompt does not fit the context with the others.")
                    continue
                return
            self._waiting.popleft()
            for other in admission.evict:
                self.ctx.forget_sequence(other.seq, 0)
            slot, n = admission.slot, admission.reuse
            if admission.source is None:
                self.ctx.forget_sequence(slot.seq, n)
            else:
                self.ctx.forget_sequence(slot.seq, 0)
                self.ctx.share_prefix(admission.source.seq, slot.seq, n)
            self.slots.apply(admission, gen.prompt, max_new)
            try:
                gen.sampler = Sampler(self.model, sampler_settings(gen.command.sampling))
            except EngineError as exc:
                self.slots.release(slot)
                self._fail(gen, str(exc))
                continue
            gen.slot, gen.reused, gen.todo = slot, n, gen.prompt[n:]
            gen.detok = StreamingDetokenizer(gen.command.stop)
            gen.prefill_started = time.perf_counter()
            self._running.append(gen)

    def _fill_batch(self) -> list[tuple[_Generation, int]]:
        """Decoding sequences first (one token each), then prompt chunks in arrival order."""
        batch = self._batch
        batch.clear()
        outputs = []
        for gen in self._running:
            if gen.next_token is not None:
                slot = gen.slot
                index = batch.add(gen.next_token, len(slot.cached), slot.seq, output=True)
                self.slots.grow(slot, [gen.next_token])
                gen.next_token = None
                outputs.append((gen, index))
        for gen in self._running:
            if not gen.todo or batch.room == 0:
                continue
            slot = gen.slot
            chunk = gen.todo[: batch.room]
            last = len(chunk) == len(gen.todo)
            start = len(slot.cached)
            for i, token in enumerate(chunk):
                index = batch.add(token, start + i, slot.seq, output=last and i == len(chunk) - 1)
            self.slots.grow(slot, chunk)
            gen.todo = gen.todo[len(chunk) :]
            if last:
                outputs.append((gen, index))
        return outputs

    def _sample(self, gen: _Generation, index: int) -> None:
        command, model = gen.command, self.model
        if gen.top_logprobs_wanted:
            entry = self._logprob_entry(index, command.top_logprobs)
        try:
            token = gen.sampler.sample(self.ctx, index)
        except GrammarTooSlow as exc:  # this request's grammar: the others go on
            self._running.remove(gen)
            self.slots.release(gen.slot)
            gen.sampler.close()
            self._fail(gen, str(exc), over_limit=WorkLimit.GRAMMAR)
            return
        now = time.perf_counter()
        if gen.n_generated == 0:
            gen.first_token_at = now
        gen.last_token_at = now
        if not command.ignore_eos and model.is_end_of_generation(token):
            self._finish(gen, StopReason.EOS)
            return
        gen.n_generated += 1
        if gen.top_logprobs_wanted:
            gen.logprobs.append(entry(token))
        text = gen.detok.feed(model.token_bytes(token))
        if text:
            self._emit(gen, text)
        if gen.detok.stopped:
            self._finish(gen, StopReason.STOP_STRING)
        elif gen.n_generated >= command.max_tokens:
            self._finish(gen, StopReason.MAX_TOKENS)
        elif len(gen.slot.cached) + 1 >= self.n_ctx_per_sequence:
            self._finish(gen, StopReason.CONTEXT_FULL)
        else:
            gen.next_token = token

    def _logprob_entry(self, index: int, n_top: int):
        """Log-probabilities of the model's distribution at `index`, before sampling changes it;
        returns a function of the chosen token."""
        row = self.ctx.logits_at(index)
        logits = np.ctypeslib.as_array(row, shape=(self.model.n_vocab,)).astype(np.float64)
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        top = np.argsort(-logprobs)[:n_top] if n_top > 0 else []
        alternatives = tuple((self.model.token_text(int(t)), float(logprobs[t])) for t in top)

        def entry(token: int) -> p.TokenLogprob:
            return p.TokenLogprob(
                token=self.model.token_text(token), logprob=float(logprobs[token]), top=alternatives
            )

        return entry

    def _emit(self, gen: _Generation, text: str, n_tokens: int = 1) -> None:
        logprobs, gen.logprobs = tuple(gen.logprobs), []
        self._send(
            p.TokenText(request_id=gen.request_id, text=text, n_tokens=n_tokens, logprobs=logprobs)
        )

    def _finish(self, gen: _Generation, reason: StopReason) -> None:
        if gen in self._running:
            self._running.remove(gen)
        if gen.detok is not None:
            tail = gen.detok.finish()
            if tail or gen.logprobs:
                self._emit(gen, tail, n_tokens=0)
        if gen.slot is not None:
            # Prompt tokens not computed yet were never cached; the sampled token that was
            # not decoded is not in the cache either.
            self.slots.release(gen.slot)
        if gen.sampler is not None:
            gen.sampler.close()
        now = time.perf_counter()
        first = gen.first_token_at or now
        stats = p.GenerationStats(
            n_prompt_tokens=len(gen.prompt),
            n_prompt_tokens_reused=gen.reused,
            n_generated=gen.n_generated,
            prefill_seconds=(first - gen.prefill_started) if gen.prefill_started else 0.0,
            time_to_first_token=first - gen.received_at,
            decode_seconds=(gen.last_token_at - first) if gen.last_token_at else 0.0,
        )
        self._send(p.GenerationDone(request_id=gen.request_id, stop_reason=reason, stats=stats))

    def _fail(self, gen: _Generation, message: str, over_limit: str = WorkLimit.NONE) -> None:
        self._send(
            p.GenerationFailed(request_id=gen.request_id, message=message, over_limit=over_limit)
        )

    def _cache_full(self, snapshot: list[tuple[_Generation, int, int | None, list[int]]]) -> None:
        """llama.cpp found no room for the batch (the cell count here is an estimate) and left
        the cache as it was: the step is undone, and the newest generation gives way, with what
        it made so far, freeing its cells for the others."""
        for gen, n_cached, next_token, todo in snapshot:
            del gen.slot.cached[n_cached:]
            gen.next_token, gen.todo = next_token, todo
        gen = self._running[-1]
        slot = gen.slot
        self._finish(gen, StopReason.CONTEXT_FULL)
        self.ctx.forget_sequence(slot.seq, 0)
        self.slots.truncate(slot, 0)
