"""Prompt lookup: draft what followed the latest earlier occurrence of the last few tokens.

No second model. Replies that copy from the prompt (a function rewritten with one change, a
quoted passage, a summary reusing its source's phrases) repeat long runs of earlier tokens; the
continuation of the longest recent match of the reply's last `max_ngram` .. `min_ngram` tokens,
in the prompt or the reply itself, is the draft (llama.cpp's "ngram-simple" / the prompt lookup
decoding of Saxena, 2023).

The n-grams are indexed as tokens arrive, so a step costs a few dictionary look-ups however long
the prompt is.
"""

from __future__ import annotations


class PromptLookup:
    name = "prompt_lookup"

    def __init__(self, *, max_ngram: int = 4, min_ngram: int = 2):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("n-gram sizes must satisfy 1 <= min_ngram <= max_ngram")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        # per n-gram size: n-gram -> where the tokens after its latest occurrence begin
        self._latest: dict[int, dict[tuple[int, ...], int]] = {}
        self._indexed = 0  # continuations starting before this are indexed

    def begin(self, prompt: list[int]) -> None:
        self._latest = {n: {} for n in range(self.min_ngram, self.max_ngram + 1)}
        self._indexed = 0

    def propose(self, tokens: list[int], n: int) -> list[int]:
        if n <= 0:
            return []
        self._index(tokens)
        end = len(tokens)
        for size in range(min(self.max_ngram, end), self.min_ngram - 1, -1):
            start = self._latest[size].get(tuple(tokens[end - size :]))
            if start is not None:
                return tokens[start : start + n]
        return []

    def decoded(self, tokens: list[int], position: int) -> None:
        pass  # the tokens alone are the index

    def _index(self, tokens: list[int]) -> None:
        """Record, for every n-gram that ends before the last token, where its continuation
        starts (the last token's own n-grams have no continuation yet). `tokens` only grows
        within a generation; `begin` starts the next."""
        if len(tokens) < self._indexed:
            self.begin(tokens)
        for cont in range(max(self._indexed, 1), len(tokens)):
            for size, latest in self._latest.items():
                if cont >= size:
                    latest[tuple(tokens[cont - size : cont])] = cont
        self._indexed = max(self._indexed, len(tokens))

    def close(self) -> None:
        self._latest = {}
