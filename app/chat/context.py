"""How full the model's context is, and fitting a conversation into it.

The GUI has no tokenizer (the model lives in the worker), so a message's size is estimated from
its characters, calibrated by the last reply's exact count: the worker reports how many tokens
the prompt took (GenerationStats.n_prompt_tokens) and how many it generated. Estimates err long
(CHARS_PER_TOKEN is low for English), so the policy acts a little early rather than too late.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.runtime import protocol as p

CHARS_PER_TOKEN = 3.0
TOKENS_PER_MESSAGE = 8  # the chat template's role markers around each message


class ContextOverflow(Exception):
    """The conversation will not fit the context and the policy is to stop."""


def estimate_tokens(message: p.ChatMessage) -> int:
    return TOKENS_PER_MESSAGE + int(len(message.content) / CHARS_PER_TOKEN + 0.999)


def estimate_prompt(messages: list[p.ChatMessage]) -> int:
    return sum(estimate_tokens(m) for m in messages)


@dataclass(frozen=True)
class Fitted:
    messages: list[p.ChatMessage]
    dropped: int  # messages left out, oldest first after the system prompt
    estimated_tokens: int


def fit_to_context(
    messages: list[p.ChatMessage], n_ctx: int, reply_tokens: int, *, drop_oldest: bool
) -> Fitted:
    """The messages to send so that the prompt and `reply_tokens` fit in `n_ctx`.

    With drop_oldest, whole turns go from the front (the system prompt stays, and the newest
    message always stays); otherwise ContextOverflow says by how much it is over.
    """
    budget = n_ctx - reply_tokens
    estimate = estimate_prompt(messages)
    if estimate <= budget:
        return Fitted(list(messages), 0, estimate)
    if not drop_oldest:
        raise ContextOverflow(
            f"The conversation (about {estimate:,} tokens) and room for a reply "
            f"({reply_tokens:,}) no longer fit the model's context of {n_ctx:,} tokens. Start a "
            "new chat, set “Context full” to drop the oldest turns, or load the model with a "
            "longer context."
        )
    system = [m for m in messages[:1] if m.role == "system"]
    rest = list(messages[len(system) :])
    dropped = 0
    while len(rest) > 1 and estimate_prompt(system + rest) > budget:
        rest.pop(0)
        dropped += 1
        # Start on a user turn: a reply without its question confuses most templates.
        while len(rest) > 1 and rest[0].role != "user":
            rest.pop(0)
            dropped += 1
    kept = system + rest
    estimate = estimate_prompt(kept)
    if estimate > budget:
        raise ContextOverflow(
            f"Even the newest message alone (about {estimate:,} tokens) does not fit the "
            f"context of {n_ctx:,} tokens with room for a reply. Shorten it, lower Max tokens, "
            "or load the model with a longer context."
        )
    return Fitted(kept, dropped, estimate)


def used_tokens(stats: p.GenerationStats) -> int:
    """Tokens in the context after a reply: its prompt plus what it generated."""
    return stats.n_prompt_tokens + stats.n_generated
