"""What every drafter offers the decode loop, and the draft length that follows acceptance.

A drafter proposes the tokens it expects next after the tokens so far (the prompt and the reply,
the last one sampled but not yet decoded). The model checks them all in one llama_decode and
keeps the longest run it would have produced itself, so a drafter can only cost time, never
change the text. Drafters propose deterministically (their most likely token): the speculative
sampling rule then reduces to "draw from the model, keep the draft while the draws equal it"
(acceptance.py says why).
"""

from __future__ import annotations

from typing import Protocol


class Drafter(Protocol):
    name: str  # SpeculativeParams.method

    def begin(self, prompt: list[int]) -> None:
        """A new generation after `prompt`: forget the last one's tokens."""

    def propose(self, tokens: list[int], n: int) -> list[int]:
        """Up to `n` tokens expected after `tokens` (prompt + reply so far); [] when the
        drafter has no guess worth checking."""

    def decoded(self, tokens: list[int], position: int) -> None:
        """The main model has just computed `tokens` from `position` on (a prompt batch, a
        plain step, or a checked step's token and its kept drafts), one output row each, and
        the rows are readable until its next decode (MTP reads their hidden states here)."""

    def close(self) -> None:
        """Free what the drafter holds (a draft model's weights and context)."""
