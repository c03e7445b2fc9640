"""Fitting a conversation into the model's context, by exact token counts.

The worker holds the tokenizer and the chat template, so it fits the conversation itself (as
llama.cpp's server does), instead of the window guessing from characters:

    fitted = fit_conversation(messages, count_tokens, budget=n_ctx - reply_room, drop_oldest=True)

`count_tokens(messages)` is the prompt's exact length with the template applied. With
`drop_oldest`, whole turns leave from the front: a turn is a user message and everything after it
up to the next user message, so the prompt always starts on a question; the system prompt and
the newest turn always stay. Without it, a conversation that does not fit raises ContextOverflow.
The number of turns to drop is found by bisection, so a long chat costs O(log turns) renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class Message(Protocol):
    role: str
    content: str


class ContextOverflow(Exception):
    """The conversation does not fit the context; str() says by how much and what to do."""


@dataclass(frozen=True)
class FittedConversation:
    messages: list
    n_tokens: int  # the prompt's exact length
    dropped: int  # messages left out (oldest first, whole turns)


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indices where a turn begins: each user message (and the first message after a system
    prompt, if that is not a user message)."""
    first = 1 if messages and messages[0].role == "system" else 0
    starts = [i for i in range(first, len(messages)) if messages[i].role == "user"]
    if first < len(messages) and (not starts or starts[0] != first):
        starts.insert(0, first)
    return starts


def fit_conversation(
    messages: Sequence[Message],
    count_tokens: Callable[[list], int],
    budget: int,
    *,
    drop_oldest: bool,
) -> FittedConversation:
    messages = list(messages)
    n_tokens = count_tokens(messages)
    if n_tokens <= budget:
        return FittedConversation(messages, n_tokens, 0)
    if not drop_oldest:
        raise ContextOverflow(
            f"The conversation ({n_tokens:,} tokens) and room for a reply no longer fit the "
            f"model's context ({budget:,} tokens for the prompt). Start a new chat, let the "
            "oldest turns be dropped, or load the model with a longer context."
        )
    system = messages[:1] if messages[0].role == "system" else []
    starts = turn_starts(messages)

    def kept_from(turn: int) -> list:
        return system + messages[starts[turn] :]

    # Keep the most turns that fit: dropping more turns never makes the prompt longer.
    lo, hi = 1, len(starts) - 1  # drop at least one turn, keep at least the newest
    best: tuple[int, int] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        size = count_tokens(kept_from(mid))
        if size <= budget:
            best, hi = (mid, size), mid - 1
        else:
            lo = mid + 1
    if best is None:
        newest = count_tokens(kept_from(len(starts) - 1))
        raise ContextOverflow(
            f"Even the newest message alone ({newest:,} tokens with the system prompt) does not "
            f"fit the context ({budget:,} tokens for the prompt, after room for the reply). "
            "Shorten it, lower the reply's token limit, or load the model with a longer context."
        )
    turn, size = best
    kept = kept_from(turn)
    return FittedConversation(kept, size, len(messages) - len(kept))
