"""Bounds on what tokenizing a prompt may cost, checked before llama.cpp tokenizes it.

llama.cpp splits a text at every special-token string first (`<|im_start|>` and the like, when
special tokens are parsed, as a rendered chat is), and that split grows with the square of the
number of such strings: on the starter model (2 busy CPU cores) 2,000 took 0.08 s, 4,000 0.33 s,
8,192 1.35 s, 16,000 5.2 s, and 80,000 in 960 kB held the worker for minutes, during which no
other request moved. Each special-token string becomes one token, and no request needs more
than a few thousand (a template adds two or three per message, and a request has at most 1,024
messages), so more than MAX_SPECIAL_STRINGS is refused before the split starts, with a message
that says so; counting them is one regular-expression scan (0.01 s for the 80,000).

Plain tokenizing is linear but not cheap: 4 MiB (the server's body limit) took 0.9-7.3 s on the
starter model by what the text holds (CJK fastest, a run of spaces slowest), and fitting a long
conversation renders it up to a dozen times. So a request has TOKENIZE_SECONDS for all of its
tokenizing. A text of at most INLINE_CHARS characters is tokenized where it is asked for (well
under 0.1 s); a longer one on a thread of its own that the request waits for until its time is
up and then abandons: the worker answers at once and goes on with other requests while that
call finishes in C (llama.cpp's tokenizer is safe to call from several threads; the model is
not closed before the abandoned calls end). While MAX_ABANDONED such calls still run, further
long texts are refused (TokenizerBusy; the server answers 503 with Retry-After) rather than
given a thread each.
"""

from __future__ import annotations

import re
import threading
import time
from functools import lru_cache

MAX_SPECIAL_STRINGS = 4096
TOKENIZE_SECONDS = 20.0  # one request's tokenizing, all of its calls together
INLINE_CHARS = 65_536  # texts this short are tokenized on the asking thread
MAX_ABANDONED = 2  # abandoned calls still running at once; past it, long texts are refused


class PromptTooCostly(ValueError):
    """The prompt would take too long to tokenize; the message says why and the limit."""


class TokenizerBusy(RuntimeError):
    """Earlier over-long tokenizing calls still run; the message says to try again shortly."""


def special_string_pattern(texts: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern matching any of the special tokens' texts (longest first), or None."""
    return _pattern(tuple(sorted({t for t in texts if t}, key=len, reverse=True)))


@lru_cache(maxsize=8)
def _pattern(texts: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(map(re.escape, texts))) if texts else None


def check_special_strings(text: str, pattern: re.Pattern[str] | None,
                          limit: int = MAX_SPECIAL_STRINGS) -> None:  # fmt: skip
    """PromptTooCostly when `text` holds more than `limit` special-token strings."""
    if pattern is None:
        return
    for count, _ in enumerate(pattern.finditer(text), 1):
        if count > limit:
            raise PromptTooCostly(
                f"The prompt holds more than {limit:,} special-token strings (such as the "
                "chat template's own markers); no conversation needs that many, and "
                "tokenizing them would hold the engine. Send fewer."
            )


def check_prompt_text(model, text: str) -> None:
    """PromptTooCostly for a text `model` should not tokenize. A text shorter than the limit
    cannot hold that many strings, so ordinary prompts never read the vocabulary."""
    if len(text) <= MAX_SPECIAL_STRINGS:
        return
    check_special_strings(text, special_string_pattern(model.special_token_texts()))


class TokenizeBudget:
    """The time one request may still spend tokenizing, over all of its calls (those on a
    thread of their own are timed; a short text's is too small to count)."""

    def __init__(self, seconds: float = TOKENIZE_SECONDS):
        self.seconds = seconds
        self.spent = 0.0

    def left(self) -> float:
        return max(0.0, self.seconds - self.spent)


class BoundedTokenizer:
    """A vocabulary's `tokenize`, bounded in time per request (see the module's docstring).

    `tokenize(text, budget, ...)` raises PromptTooCostly for a text with too many special-token
    strings or one whose tokenizing outlasts the budget, and TokenizerBusy while MAX_ABANDONED
    abandoned calls still run. `close()` waits for those calls: the vocabulary they read must
    outlive them."""

    def __init__(self, vocabulary, *, inline_chars: int = INLINE_CHARS,
                 max_abandoned: int = MAX_ABANDONED):  # fmt: skip
        self.vocabulary = vocabulary
        self.inline_chars = inline_chars
        self.max_abandoned = max_abandoned
        self._abandoned: list[threading.Thread] = []

    def tokenize(self, text: str, budget: TokenizeBudget, *, add_special: bool,
                 parse_special: bool = True) -> list[int]:  # fmt: skip
        vocabulary = self.vocabulary
        if parse_special:
            check_prompt_text(vocabulary, text)
        if len(text) <= self.inline_chars:
            return vocabulary.tokenize(text, add_special=add_special, parse_special=parse_special)
        self._abandoned = [t for t in self._abandoned if t.is_alive()]
        if len(self._abandoned) >= self.max_abandoned:
            raise TokenizerBusy(
                "The engine is still finishing earlier prompts that took too long to tokenize; "
                "try again in a few seconds."
            )
        if budget.left() <= 0.0:
            raise self._too_long(text, budget)
        outcome: list = []

        def run() -> None:
            try:
                outcome.append(vocabulary.tokenize(text, add_special=add_special,
                                                   parse_special=parse_special))  # fmt: skip
            except BaseException as exc:  # handed to the waiting thread, which raises it
                outcome.append(exc)

        thread = threading.Thread(target=run, name="tokenize", daemon=True)
        started = time.monotonic()
        thread.start()
        thread.join(budget.left())
        budget.spent += time.monotonic() - started
        if thread.is_alive():
            self._abandoned.append(thread)
            raise self._too_long(text, budget)
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    @staticmethod
    def _too_long(text: str, budget: TokenizeBudget) -> PromptTooCostly:
        return PromptTooCostly(
            f"Tokenizing the prompt ({len(text):,} characters) took longer than the limit of "
            f"{budget.seconds:g} s and was given up; send a shorter prompt or conversation."
        )

    def close(self) -> None:
        """Wait for abandoned calls: the vocabulary they read is about to be freed."""
        for thread in self._abandoned:
            thread.join()
        self._abandoned = []
