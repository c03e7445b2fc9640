"""Where a generated token goes: the end-of-generation check, the count, the text, the stop
checks. Plain and speculative decoding both pass every token through `take`, in the order they
would come out, so they stop at the same token for the same reason."""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.enums import StopReason
from engine.runtime.detokenizer import StreamingDetokenizer
from engine.runtime.engine_api import Vocabulary as Model


class ReplyTokens:
    def __init__(
        self,
        model: Model,
        detok: StreamingDetokenizer,
        emit: Callable[[str], None],
        *,
        max_tokens: int,
        should_stop: Callable[[], bool],
        ignore_eos: bool,
    ):
        self.model, self.detok, self.emit = model, detok, emit
        self.max_tokens, self.should_stop, self.ignore_eos = max_tokens, should_stop, ignore_eos
        self.n_generated = 0
        self.first_token_at = self.last_token_at = time.perf_counter()

    def take(self, token: int) -> str | None:
        """Emit `token`'s text; the StopReason if the reply ends with it, else None."""
        now = time.perf_counter()
        if self.n_generated == 0:
            self.first_token_at = self.last_token_at = now
        if not self.ignore_eos and self.model.is_end_of_generation(token):
            return StopReason.EOS
        self.n_generated += 1
        self.last_token_at = now
        text = self.detok.feed(self.model.token_bytes(token))
        if text:
            self.emit(text)
        if self.detok.stopped:
            return StopReason.STOP_STRING
        if self.should_stop():
            return StopReason.STOPPED
        if self.n_generated >= self.max_tokens:
            return StopReason.MAX_TOKENS
        return None

    def finish(self) -> None:
        """Release the text held back (a partial stop string that never completed)."""
        tail = self.detok.finish()
        if tail:
            self.emit(tail)
