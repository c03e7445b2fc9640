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
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.enums import StopReason, WorkLimit
from engine.llama.batch import SequenceBatch
from engine.llama.driver import Context, EngineError, Model
from engine.llama.sampler import GrammarTooSlow, Sampler
from engine.runtime import protocol as p
from engine.runtime.batch_requests import BatchGeneration, BatchRequests
from engine.runtime.detokenizer import StreamingDetokenizer
from engine.runtime.kv_slots import Slot, SlotTable
from engine.runtime.to_llama import sampler_settings


@dataclass
class _Generation(BatchGeneration):
    slot: Slot | None = None


class BatchedDecoder(BatchRequests[_Generation]):
    def __init__(self, model: Model, ctx: Context, n_parallel: int, send: Callable[[Any], None]):
        self.model, self.ctx, self._send = model, ctx, send
        self.n_parallel = n_parallel
        self.slots = SlotTable(n_parallel, ctx.info.n_ctx)
        # Each sequence may use its share of the cache, so one long request cannot starve
        # the others; cells left over (by short requests) are what prefix sharing saves.
        self.n_ctx_per_sequence = ctx.info.n_ctx // n_parallel
        self._batch = SequenceBatch(ctx.info.n_batch)
        super().__init__()

    def _new_generation(self, command: p.Generate, received_at: float, prompt: list[int]):
        return _Generation(command=command, received_at=received_at, prompt=prompt)

    def _n_cached(self, gen: _Generation) -> int:
        return len(gen.slot.cached)

    def _release(self, gen: _Generation) -> None:
        # Prompt tokens not computed yet were never cached; the sampled token that was not
        # decoded is not in the cache either.
        if gen.slot is not None:
            self.slots.release(gen.slot)
            gen.slot = None
        if gen.sampler is not None:
            gen.sampler.close()
            gen.sampler = None

    # -- from the main thread (the reader thread's calls: RequestQueue) -----------------------

    def cached_tokens(self) -> int:
        return sum(len(s.cached) for s in self.slots.slots)

    def fail_everything(self, message: str) -> None:
        """llama.cpp failed a step: every generation ends with the reason, and the cache is
        cleared so the next one starts from a known state."""
        super().fail_everything(message)
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
            gen.slot, gen.n_reused, gen.todo = slot, n, gen.prompt[n:]
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
        entry = None
        if gen.top_logprobs_wanted:
            entry = self._logprob_entry_at(index, gen.command.top_logprobs)
        try:
            token = gen.sampler.sample(self.ctx, index)
        except GrammarTooSlow as exc:  # this request's grammar: the others go on
            self._running.remove(gen)
            self._release(gen)
            self._fail(gen, str(exc), over_limit=WorkLimit.GRAMMAR)
            return
        self._take_token(gen, token, entry)

    def _logprob_entry_at(self, index: int, n_top: int):
        """The log-probability entry maker for the model's distribution at `index`, before
        sampling changes it."""
        row = self.ctx.logits_at(index)
        logits = np.ctypeslib.as_array(row, shape=(self.model.n_vocab,)).astype(np.float64)
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        top = np.argsort(-logprobs)[:n_top] if n_top > 0 else []
        return self._logprob_entry(logprobs, [(int(t), float(logprobs[t])) for t in top])

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
