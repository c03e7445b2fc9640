"""What both batch decoders do alike with a request (batched_decode.py on llama.cpp,
hearth_batch.py on the Hearth engine): check its prompt, stop it when asked, take each token
it samples (stop conditions, text, log-probabilities) and report its end with its stats.

A decoder subclasses BatchRequests with its own generation record (a BatchGeneration) and
says how many positions a generation's sequence holds (`_n_cached`) and how its cache and
sampler are given back (`_release`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engine.enums import StopReason, WorkLimit
from engine.llama.driver import EngineError
from engine.runtime import protocol as p
from engine.runtime.detokenizer import StreamingDetokenizer
from engine.runtime.request_queue import RequestQueue


@dataclass
class BatchGeneration:
    command: p.Generate
    received_at: float
    prompt: list[int]
    sampler: Any = None
    detok: StreamingDetokenizer | None = None
    todo: list[int] = field(default_factory=list)  # prompt tokens still to compute
    next_token: int | None = None  # sampled, decoded in the next step
    n_reused: int = 0  # prompt tokens taken from the cache, not computed
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


Generation = TypeVar("Generation", bound=BatchGeneration)


class BatchRequests(RequestQueue[Generation]):
    """The request side of a batch decoder; subclasses set n_parallel and n_ctx_per_sequence."""

    n_parallel: int
    n_ctx_per_sequence: int
    _send: Callable[[Any], None]

    def _new_generation(self, command: p.Generate, received_at: float, prompt: list[int]):
        raise NotImplementedError

    def _n_cached(self, gen: Generation) -> int:
        """Positions the generation's sequence holds."""
        raise NotImplementedError

    def _release(self, gen: Generation) -> None:
        """Give the generation's cache and sampler back (once; a second call does nothing)."""
        raise NotImplementedError

    # -- from the main thread -----------------------------------------------------------------

    def submit(self, command: p.Generate, received_at: float, prompt: list[int]) -> None:
        if not prompt:
            raise EngineError("The prompt is empty.")
        if len(prompt) >= self.n_ctx_per_sequence:
            raise EngineError(
                f"The prompt is {len(prompt)} tokens long but each of the {self.n_parallel} "
                f"parallel sequences holds {self.n_ctx_per_sequence}. Shorten it, or load the "
                "model with a longer context."
            )
        # A "stop everything" asked before this request arrived is for the others only.
        self._honour_stops()
        self._waiting.append(self._new_generation(command, received_at, prompt))

    def stop_everything(self) -> None:
        """End every generation now (a new model is loading)."""
        for gen in list(self._running):
            self._finish(gen, StopReason.STOPPED)
        while self._waiting:
            self._finish(self._waiting.popleft(), StopReason.STOPPED)

    def fail_everything(self, message: str) -> None:
        """A step failed: every generation ends with the reason."""
        for gen in list(self._running) + list(self._waiting):
            self._release(gen)
            self._fail(gen, message)
        self._running.clear()
        self._waiting.clear()

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

    def _take_token(self, gen: Generation, token: int, logprob_entry=None) -> None:
        """The token sampled for `gen`: its text goes out, and the generation either ends
        (end of generation, a stop string, max_tokens, its share of the context) or decodes
        the token in the next step. `logprob_entry` (when log-probabilities are wanted) makes
        the token's entry."""
        command, model = gen.command, self.model
        now = time.perf_counter()
        if gen.n_generated == 0:
            gen.first_token_at = now
        gen.last_token_at = now
        if not command.ignore_eos and model.is_end_of_generation(token):
            self._finish(gen, StopReason.EOS)
            return
        gen.n_generated += 1
        if logprob_entry is not None:
            gen.logprobs.append(logprob_entry(token))
        text = gen.detok.feed(model.token_bytes(token))
        if text:
            self._emit(gen, text)
        if gen.detok.stopped:
            self._finish(gen, StopReason.STOP_STRING)
        elif gen.n_generated >= command.max_tokens:
            self._finish(gen, StopReason.MAX_TOKENS)
        elif self._n_cached(gen) + 1 >= self.n_ctx_per_sequence:
            self._finish(gen, StopReason.CONTEXT_FULL)
        else:
            gen.next_token = token

    def _logprob_entry(self, logprobs, top: list[tuple[int, float]]):
        """The function of the chosen token that makes its log-probability entry, from the
        model's log-probabilities before sampling and the `top` (token, log-probability) pairs."""
        alternatives = tuple((self.model.token_text(t), v) for t, v in top)

        def entry(token: int) -> p.TokenLogprob:
            return p.TokenLogprob(
                token=self.model.token_text(token), logprob=float(logprobs[token]), top=alternatives
            )

        return entry

    def _emit(self, gen: Generation, text: str, n_tokens: int = 1) -> None:
        logprobs, gen.logprobs = tuple(gen.logprobs), []
        self._send(
            p.TokenText(request_id=gen.request_id, text=text, n_tokens=n_tokens, logprobs=logprobs)
        )

    def _finish(self, gen: Generation, reason: StopReason) -> None:
        if gen in self._running:
            self._running.remove(gen)
        if gen.detok is not None:
            tail = gen.detok.finish()
            if tail or gen.logprobs:
                self._emit(gen, tail, n_tokens=0)
        self._release(gen)
        now = time.perf_counter()
        first = gen.first_token_at or now
        stats = p.GenerationStats(
            n_prompt_tokens=len(gen.prompt),
            n_prompt_tokens_reused=gen.n_reused,
            n_generated=gen.n_generated,
            prefill_seconds=(first - gen.prefill_started) if gen.prefill_started else 0.0,
            time_to_first_token=first - gen.received_at,
            decode_seconds=(gen.last_token_at - first) if gen.last_token_at else 0.0,
        )
        self._send(p.GenerationDone(request_id=gen.request_id, stop_reason=reason, stats=stats))

    def _fail(self, gen: Generation, message: str, over_limit: str = WorkLimit.NONE) -> None:
        self._send(
            p.GenerationFailed(request_id=gen.request_id, message=message, over_limit=over_limit)
        )
