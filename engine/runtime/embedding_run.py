"""Embedding a request's inputs in the worker: bounded in tokens, and stoppable between inputs.

The worker embeds on its main thread, so while it does, no generation steps. A request within
the API's limits (64 inputs of up to 2,048 tokens) held every chat for over 20 minutes on a CPU,
and went on after its client had gone. So the request's whole token count is bounded before any
input is computed (MAX_EMBEDDING_TOKENS, about 8 full inputs), and a stop (the client gone, the
server's time limit) is honoured after each input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

MAX_EMBEDDING_TOKENS = 16_384


class EmbeddingStopped(Exception):
    """The request was stopped between two inputs."""


def embed_inputs(
    tokenize: Callable[[str], list[int]],
    embed: Callable[[list[int]], Sequence[float]],
    inputs: Sequence[str],
    stopped: Callable[[], bool],
    max_tokens: int = MAX_EMBEDDING_TOKENS,
) -> tuple[tuple[tuple[float, ...], ...], int]:
    """(one vector per input, tokens in all). ValueError when the inputs are too long together;
    EmbeddingStopped when `stopped()` says so between inputs."""
    token_lists = []
    for text in inputs:
        token_lists.append(tokenize(text))
        if sum(map(len, token_lists)) > max_tokens:
            raise ValueError(
                f"The inputs are over {max_tokens:,} tokens together, the most one request "
                "may embed (the engine does nothing else meanwhile); send them in several "
                "requests."
            )
    vectors = []
    for tokens in token_lists:
        if stopped():
            raise EmbeddingStopped
        vectors.append(tuple(embed(tokens)))
    return tuple(vectors), sum(map(len, token_lists))
