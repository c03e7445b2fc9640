"""Bounds on what tokenizing a prompt may cost, checked before llama.cpp tokenizes it.

llama.cpp splits a text at every special-token string first (`<|im_start|>` and the like, when
special tokens are parsed, as a rendered chat is), and that split grows with the square of the
number of such strings: on the starter model (2 busy CPU cores) 2,000 took 0.08 s, 4,000 0.33 s,
8,192 1.35 s, 16,000 5.2 s, and 80,000 in 960 kB held the worker for minutes, during which no
other request moved. Each special-token string becomes one token, and no request needs more
than a few thousand (a template adds two or three per message, and a request has at most 1,024
messages), so more than MAX_SPECIAL_STRINGS is refused before the split starts, with a message
that says so; counting them is one regular-expression scan (0.01 s for the 80,000).
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_SPECIAL_STRINGS = 4096


class PromptTooCostly(ValueError):
    """The prompt would take too long to tokenize; the message says why."""


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
