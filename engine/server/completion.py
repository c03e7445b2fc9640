"""Running one generation for a route: the whole reply at once, or its pieces as they come.

Both apply the server's time limit and turn the engine's failures into API errors. The stop
reasons map to OpenAI's finish reasons here too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from engine.enums import StopReason
from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from engine.server.engine_link import EngineLink, GenerationRequest
from engine.server.errors import APIError, crash_message, generation_failed

FINISH_REASONS = {
    StopReason.EOS: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_FULL: "length",
    StopReason.STOPPED: "stop",
}


@dataclass
class Reply:
    text: str = ""
    stop_reason: str = ""
    stats: p.GenerationStats | None = None
    logprobs: list[p.TokenLogprob] = field(default_factory=list)
    n_tokens: int = 0

    @property
    def finish_reason(self) -> str:
        return FINISH_REASONS.get(self.stop_reason, "stop")

    @property
    def prompt_tokens(self) -> int:
        return self.stats.n_prompt_tokens if self.stats else 0

    @property
    def completion_tokens(self) -> int:
        return self.stats.n_generated if self.stats else self.n_tokens


@dataclass
class Piece:
    """Text that has become final while the reply is generated."""

    text: str
    logprobs: tuple[p.TokenLogprob, ...] = ()


async def pieces(
    link: EngineLink,
    request: GenerationRequest,
    timeout_s: float,
    reply: Reply,
    token_s: float = float("inf"),
) -> AsyncIterator[Piece]:
    """The reply's text as it comes; `reply` holds the whole of it and its stats at the end.
    Raises APIError for a failed generation, or 504 past `timeout_s`, or when a reply that
    has begun brings no token for `token_s` (the generation is stopped then; a worker that
    does not stop it is ended by the link). The first token is not timed apart: a long
    prompt's prefill on a CPU may rightly take minutes."""
    deadline = time.monotonic() + timeout_s
    token_deadline = float("inf")  # from the first token on: the next must come in token_s
    events = link.generate(request)
    try:
        while True:
            now = time.monotonic()
            left = min(deadline, token_deadline) - now
            try:
                event = await asyncio.wait_for(anext(events), max(left, 0.001))
            except StopAsyncIteration:
                return
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise APIError(
                        504,
                        f"The reply took longer than the server's limit of "
                        f"{timeout_s:.0f} s and was stopped; ask for fewer tokens.",
                    ) from None
                raise APIError(
                    504,
                    f"The engine brought no new token for {token_s:g} s and the reply was "
                    "stopped. A response_format or format schema can make each token this "
                    "slow: simplify it.",
                ) from None
            if isinstance(event, p.TokenText):
                token_deadline = time.monotonic() + token_s
                reply.text += event.text
                reply.n_tokens += event.n_tokens
                reply.logprobs.extend(event.logprobs)
                yield Piece(event.text, tuple(event.logprobs))
            elif isinstance(event, p.GenerationDone):
                reply.stop_reason, reply.stats = event.stop_reason, event.stats
            elif isinstance(event, p.GenerationFailed):
                raise generation_failed(event)
            elif isinstance(event, EngineCrashed):  # not this request's fault: retry later
                raise APIError(503, crash_message(event, link.reloads_after_crash),
                               headers={"Retry-After": "5"})  # fmt: skip
    finally:
        await events.aclose()


async def whole_reply(
    link: EngineLink, request: GenerationRequest, timeout_s: float, token_s: float = float("inf")
) -> Reply:
    reply = Reply()
    async for _ in pieces(link, request, timeout_s, reply, token_s):
        pass
    return reply
