"""A llama_batch that holds tokens of several sequences, for one llama_decode per step.

`llama_batch_get_one` (the single-sequence path) cannot say which sequence a token belongs to or
where it sits; this owning wrapper over `llama_batch_init` can. Only the engine worker imports it.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as C

from engine.llama.driver import Context, EngineError, decode_failure


class SequenceBatch:
    """Up to `capacity` tokens, each with its position, its sequence and whether its logits
    are wanted. Reused step after step: `clear()` then `add()`s, then `decode()`."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._batch = C.llama_batch_init(capacity, 0, 1)
        self.n_tokens = 0

    def clear(self) -> None:
        self.n_tokens = 0

    @property
    def room(self) -> int:
        return self.capacity - self.n_tokens

    def add(self, token: int, position: int, seq: int, *, output: bool) -> int:
        """Append a token; return its index in the batch (where its logits will be)."""
        i = self.n_tokens
        if i >= self.capacity:
            raise EngineError("Internal error: the decode batch is full.")
        b = self._batch
        b.token[i] = token
        b.pos[i] = position
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = 1 if output else 0
        self.n_tokens = i + 1
        return i

    def decode(self, ctx: Context) -> int:
        """Run the model over the batch; 0 on success, llama_decode's code otherwise (1: no
        room in the KV cache, which the caller can act on)."""
        self._batch.n_tokens = self.n_tokens
        rc = C.llama_decode(ctx.handle, self._batch)
        if rc not in (0, 1):
            raise EngineError(decode_failure(rc))
        return rc

    def close(self) -> None:
        if self._batch is not None:
            C.llama_batch_free(self._batch)
            self._batch = None


def pooled_outputs(ctx: Context, token_lists: list[list[int]]) -> list[list[float]]:
    """The pooled output of each token list (an embedding, or a reranker's scores), all in one
    llama_decode: each list is a sequence of its own, so inputs never see each other. `ctx` is
    made with embeddings=True and room for len(token_lists) sequences; its cache is cleared
    before and after."""
    total = sum(map(len, token_lists))
    if total > ctx.info.n_batch:
        raise EngineError(
            f"The inputs are {total} tokens together; one batch of embeddings takes at most "
            f"{ctx.info.n_batch}. Send them in smaller groups."
        )
    batch = SequenceBatch(max(1, total))
    try:
        for seq, tokens in enumerate(token_lists):
            for position, token in enumerate(tokens):
                batch.add(token, position, seq, output=True)
        ctx.clear()
        rc = batch.decode(ctx)
        if rc != 0:
            raise EngineError(decode_failure(rc))
        return [ctx.pooled_output(seq) for seq in range(len(token_lists))]
    finally:
        ctx.clear()
        batch.close()
