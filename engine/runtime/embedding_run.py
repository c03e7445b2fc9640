"""Embedding a request's inputs in the worker: in batches, bounded in tokens, and stoppable
between batches.

Several inputs go through the model in one llama_decode, each a sequence of its own (as
llama-server batches them): one pass over the weights for many short inputs instead of one
each. A batch holds at most `batch_inputs` inputs and `batch_tokens` tokens together (the
embedding context's sequences and batch size).

The worker embeds on its main thread, so while it does, no generation steps. A request within
the API's limits (64 inputs of up to 2,048 tokens) held every chat for over 20 minutes on a CPU,
and went on after its client had gone. So the request's whole token count is bounded before any
input is computed (MAX_EMBEDDING_TOKENS, about 8 full inputs), and a stop (the client gone, the
server's time limit) is honoured after each batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

MAX_EMBEDDING_TOKENS = 16_384


class EmbeddingStopped(Exception):
    """The request was stopped between two inputs."""


def batches(lengths: Sequence[int], batch_tokens: int, batch_inputs: int) -> list[range]:
    """Consecutive groups of the inputs (by their token counts), each of at most `batch_inputs`
    inputs and `batch_tokens` tokens together; an input longer than `batch_tokens` alone is a
    group of its own (the engine refuses it, saying its length)."""
    groups: list[range] = []
    start, tokens = 0, 0
    for i, n in enumerate(lengths):
        if i > start and (i - start >= batch_inputs or tokens + n > batch_tokens):
            groups.append(range(start, i))
            start, tokens = i, 0
        tokens += n
    if start < len(lengths):
        groups.append(range(start, len(lengths)))
    return groups


def embed_inputs(
    tokenize: Callable[[str], list[int]],
    embed_batch: Callable[[list[list[int]]], Sequence[Sequence[float]]],
    inputs: Sequence[str],
    stopped: Callable[[], bool],
    max_tokens: int = MAX_EMBEDDING_TOKENS,
    batch_tokens: int = MAX_EMBEDDING_TOKENS,
    batch_inputs: int = 1,
) -> tuple[tuple[tuple[float, ...], ...], int]:
    """(one vector per input, tokens in all). ValueError when the inputs are too long together;
    EmbeddingStopped when `stopped()` says so between batches."""
    token_lists = []
    for text in inputs:
        token_lists.append(tokenize(text))
        if sum(map(len, token_lists)) > max_tokens:
            raise ValueError(
                f"The inputs are over {max_tokens:,} tokens together, the most one request "
                "may embed (the engine does nothing else meanwhile); send them in several "
                "requests."
            )
    vectors: list[tuple[float, ...]] = []
    for group in batches([len(t) for t in token_lists], batch_tokens, batch_inputs):
        if stopped():
            raise EmbeddingStopped
        vectors.extend(tuple(v) for v in embed_batch([token_lists[i] for i in group]))
    return tuple(vectors), sum(map(len, token_lists))
