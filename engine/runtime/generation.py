"""The decode loop: prefill the prompt, then sample and decode one token at a time.

The loop drives any engine through the seam (engine_api.py): `ctx.decode(prompt)` and
`ctx.step(token)` return the output the sampler picks the next token from. Per token it makes a
few Python calls around the engine's own work (llama.cpp's sampler chain and llama_decode in C,
or the Hearth engine's captured decode graph), so it keeps pace with llama.cpp's own benchmark.
Text leaves through `emit`, which must not block (the worker hands it to a writer thread).

The KV cache is kept between calls: a new prompt that starts with the tokens already cached
(the next turn of a conversation) only computes the new tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.enums import StopReason
from engine.runtime.detokenizer import StreamingDetokenizer
from engine.runtime.engine_api import (
    Context,
    EngineError,
    MediaPrompt,
    Model,
    Sampler,
    StepOutput,
)
from engine.runtime.protocol import GenerationStats, SamplingParams
from engine.runtime.reply_tokens import ReplyTokens
from engine.runtime.speculative.decode_loop import SpeculativeLoop
from engine.runtime.speculative.setup import Speculation


@dataclass
class Session:
    """A loaded model with its context, and the tokens whose KV cache the context holds."""

    model: Model
    ctx: Context
    cached: list[int] = field(default_factory=list)
    speculation: Speculation | None = None  # the drafter and what it has learnt, when asked
    # why the engine chose to decode without speculation (SpeculativeParams "auto"), for the
    # stats line of every reply; "" where it was not the engine's choice
    speculation_off_reason: str = ""
    _sampler: Sampler | None = None
    _sampler_params: SamplingParams | None = None

    def sampler_for(self, sampling: SamplingParams) -> Sampler:
        """The sampler for these settings, kept while they stay the same: attaching a new
        chain to llama.cpp's graph makes it reserve its compute graph again (milliseconds on
        the first token of every reply)."""
        if self._sampler is not None and self._sampler_params == sampling:
            self._sampler.reset()
            return self._sampler
        if self._sampler is not None:
            self._sampler.close()
        self._sampler = self.ctx.new_sampler(sampling)
        self._sampler_params = sampling
        return self._sampler

    def close_context(self) -> None:
        """Free the context (KV cache, compute buffers) and keep the weights."""
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        if self.speculation is not None:
            self.speculation.close()  # a draft model's weights and context go with it
            self.speculation = None
        self.ctx.close()
        self.cached = []

    def close(self) -> None:
        self.close_context()
        self.model.close()


@dataclass(frozen=True)
class Outcome:
    stop_reason: str
    stats: GenerationStats


class Stopped(Exception):
    """The user asked to stop before the first token."""


def reuse_cached_prefix(session: Session, prompt: list[int]) -> int:
    """Keep the cached KV entries that the prompt starts with; return how many were kept."""
    cached = session.cached
    n = 0
    limit = min(len(cached), len(prompt))
    while n < limit and cached[n] == prompt[n]:
        n += 1
    # At least one token must be computed, to have logits to sample the next token from.
    n = min(n, len(prompt) - 1)
    if n > 0 and _window_lost(session, n):
        n = 0
    if n < len(cached) and not session.ctx.forget_from(n):
        # Some caches (recurrent state) cannot drop a tail: start over.
        n = 0
    if n == 0:
        session.ctx.clear()
    session.cached = cached[:n]
    return n


def _window_lost(session: Session, n: int) -> bool:
    """True if resuming at position n needs window tokens that the cache has already dropped:
    sliding-window layers that do not keep the full context keep only the last window."""
    ctx = session.ctx
    n_swa = session.model.n_swa()
    if ctx.info.swa_full or n_swa <= 0:
        return False
    return ctx.first_cached_position() > max(0, n - n_swa)


def generate(
    session: Session,
    prompt: list[int],
    sampling: SamplingParams,
    *,
    max_tokens: int,
    stop_strings: tuple[str, ...],
    emit: Callable[[str], None],
    should_stop: Callable[[], bool],
    started_at: float,
    ignore_eos: bool = False,
    speculate: bool = True,
    media: MediaPrompt | None = None,
) -> Outcome:
    """Generate up to `max_tokens` tokens after `prompt`, emitting text as it becomes final.
    With a drafter in the session (and `speculate`), drafted tokens are checked several per
    step; the text is the same. `media`: the prompt holds images (`prompt` is its tokens);
    it is decoded through the engine's projector, without speculation."""
    n_ctx = session.ctx.info.n_ctx
    if not prompt:
        raise EngineError("The prompt is empty.")
    if len(prompt) >= n_ctx:
        raise EngineError(
            f"The conversation is {len(prompt)} tokens long but the context holds {n_ctx}. "
            "Start a new chat, shorten the conversation, or load the model with a longer context."
        )
    sampler = session.sampler_for(sampling)
    if media is not None:
        speculate = False  # drafts are checked against text tokens, not image positions
        reused, prefill_seconds, out = _prefill_media(session, media, should_stop)
    else:
        reused, prefill_seconds, out = _prefill(session, prompt, should_stop)
    reply = ReplyTokens(
        session.model,
        StreamingDetokenizer(stop_strings),
        emit,
        max_tokens=max_tokens,
        should_stop=should_stop,
        ignore_eos=ignore_eos,
    )
    if speculate and session.speculation is not None:
        greedy = _plain_greedy(sampling)
        loop = SpeculativeLoop(session, sampler, reply, prompt, greedy=greedy, first=out)
        reason, speculated = loop.run(), loop.figures()
    else:
        reason, speculated = _DecodeLoop(session, sampler, reply, out).run(), {}
        if session.speculation_off_reason:
            speculated = {"speculative": "off", "speculative_why": session.speculation_off_reason}
    stats = GenerationStats(
        n_prompt_tokens=len(prompt),
        n_prompt_tokens_reused=reused,
        n_generated=reply.n_generated,
        prefill_seconds=prefill_seconds,
        time_to_first_token=reply.first_token_at - started_at,
        decode_seconds=reply.last_token_at - reply.first_token_at,
        **speculated,
    )
    return Outcome(stop_reason=reason, stats=stats)


def _plain_greedy(sampling: SamplingParams) -> bool:
    """Greedy with nothing that looks at the history: the chosen token is the logits' argmax,
    which the speculative loop then reads directly (llama.cpp's greedy sampler keeps the first
    of equal maxima, as numpy's argmax does)."""
    penalised = sampling.repeat_penalty != 1.0 or sampling.presence_penalty != 0.0
    penalised = (penalised or sampling.frequency_penalty != 0.0) and sampling.repeat_last_n != 0
    return sampling.temperature <= 0 and not penalised and not sampling.grammar


def _prefill(session: Session, prompt: list[int], should_stop) -> tuple[int, float, StepOutput]:
    """Compute the prompt's tokens that are not cached yet; return (reused, seconds, the last
    token's output). At least one token is always computed (reuse_cached_prefix)."""
    started = time.perf_counter()
    reused = reuse_cached_prefix(session, prompt)
    todo = prompt[reused:]
    step = session.ctx.info.n_batch
    out = None
    for start in range(0, len(todo), step):
        if should_stop():
            raise Stopped
        batch = todo[start : start + step]
        out = session.ctx.decode(batch)
        if session.speculation is not None:  # MTP drafting pairs each token with its state
            session.speculation.drafter.decoded(batch, len(session.cached))
        session.cached.extend(batch)
    session.ctx.synchronize()  # the clock must stop when the work is done, not queued
    return reused, time.perf_counter() - started, out


def _prefill_media(
    session: Session, media: MediaPrompt, should_stop
) -> tuple[int, float, StepOutput]:
    """As `_prefill`, for a prompt with images: the cached prefix is kept up to where decoding
    can resume (never inside an image), then the rest is decoded chunk by chunk."""
    started = time.perf_counter()
    if should_stop():
        raise Stopped
    reused = media.resume_point(reuse_cached_prefix(session, media.tokens))
    if reused < len(session.cached) and not session.ctx.forget_from(reused):
        reused = 0
    if reused == 0:
        session.ctx.clear()
    session.cached = session.cached[:reused]
    try:
        out = media.decode_from(session.ctx, reused)
    except EngineError:
        session.ctx.clear()  # part of the prompt may be in the cache: start over next time
        session.cached = []
        raise
    session.cached = list(media.tokens)
    session.ctx.synchronize()
    return reused, time.perf_counter() - started, out


class _DecodeLoop:
    """One token per step: sample, show, decode. The hot path of the whole app."""

    def __init__(self, session: Session, sampler: Sampler, reply: ReplyTokens, out: StepOutput):
        self.session, self.sampler, self.reply, self.out = session, sampler, reply, out

    def run(self) -> str:
        try:
            return self._steps()
        finally:
            self.reply.finish()

    def _steps(self) -> str:
        session, ctx, out = self.session, self.session.ctx, self.out
        sample, take, reply = self.sampler.sample, self.reply.take, self.reply
        n_ctx = ctx.info.n_ctx
        while reply.n_generated < reply.max_tokens:
            token = sample(out)
            reason = take(token)
            if reason is not None:
                return reason
            if len(session.cached) + 1 >= n_ctx:
                return StopReason.CONTEXT_FULL
            out = ctx.step(token)
            session.cached.append(token)
        return StopReason.MAX_TOKENS
