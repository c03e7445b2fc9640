"""MTP drafting: the model's own multi-token-prediction (NextN) layers, where the GGUF has them.

As llama.cpp's own driver does it (common/speculative.cpp, common_speculative_impl_draft_mtp),
through public calls (engine/llama/mtp.py): a second context runs the NextN layer, its KV cache
one entry per position of the main context's. Position p's entry is made from the token at p and
the main model's hidden state at p - 1, so after every main decode (prompt batches included) the
tokens it kept are fed to the MTP context with the states that decode left (`decoded`). To
draft, the last sampled token goes in with the main model's last state; the MTP layer's logits
give the first draft, and its own hidden state, paired with that draft, the next one.

Drafts are the MTP layer's most likely tokens with no confidence floor (llama.cpp's p_min of 0
for MTP); the adaptive draft length decides how many are worth checking.
"""

from __future__ import annotations

import numpy as np

from engine.llama.driver import Context, EngineError, Model
from engine.llama.mtp import MtpContext, hidden_state, keep_hidden_states
from engine.llama.params import ContextSettings

# The main model's hidden states of the latest positions are kept, so that a prefix reused by
# the next turn that ends a little before the last token still finds the state it pairs with.
KEPT_STATES = 64


def mtp_layers(model: Model) -> int:
    """How many MTP layers the loaded model carries (0: none)."""
    return model.n_mtp_layers()


class MtpDrafter:
    name = "mtp"

    def __init__(self, model: Model, ctx: Context, settings: ContextSettings):
        n = mtp_layers(model)
        if n == 0:
            raise EngineError(
                "This model has no MTP (multi-token prediction) layers; choose prompt lookup "
                "or a draft model instead."
            )
        if ctx.info.n_outputs_max < ctx.info.n_batch:
            raise EngineError(
                "MTP drafting needs every prompt token's hidden state, and this context keeps "
                "fewer rows per batch; load the model again with MTP chosen."
            )
        self.model, self.ctx = model, ctx
        self.mtp = MtpContext(model, settings)
        self.n_embd = self.mtp.n_embd
        self._zeros = np.zeros(self.n_embd, dtype=np.float32)
        self._states: dict[int, np.ndarray] = {}  # position -> main model's hidden state
        self._fed = 0  # the MTP cache holds positions [0, _fed)
        keep_hidden_states(ctx)

    def begin(self, prompt: list[int]) -> None:
        pass  # the prompt's batches came through `decoded`

    def decoded(self, tokens: list[int], position: int) -> None:
        if not tokens:
            return
        states = np.stack([hidden_state(self.ctx, row, self.n_embd) for row in range(len(tokens))])
        if position > self._fed:  # positions the MTP never saw (a reply decoded without it)
            self._states.update(enumerate(states, start=position))
            return  # filled in by the next propose, from its tokens
        paired = np.vstack([self._state(position - 1)[None, :], states[:-1]])
        self.mtp.forget_from(position)
        self.mtp.feed(tokens, position, paired, logits=False)
        self._fed = position + len(tokens)
        self._states.update(enumerate(states, start=position))
        for old in [p for p in self._states if p < self._fed - KEPT_STATES]:
            del self._states[old]

    def propose(self, tokens: list[int], n: int) -> list[int]:
        if n <= 0:
            return []
        last = len(tokens) - 1  # the sampled token's position; the main model has the rest
        self._catch_up(tokens[:last])
        self.mtp.forget_from(last)  # the previous step's drafts
        drafts: list[int] = []
        token, state = tokens[last], self._state(last - 1)
        for position in range(last, last + n):
            self.mtp.feed([token], position, state[None, :], logits=True)
            self._fed = position + 1
            token = int(self.mtp.logits_of_last().argmax())
            drafts.append(token)
            state = self.mtp.last_hidden()
            if state is None:
                break  # this llama.cpp does not show the MTP layer's state: one draft a step
        return drafts

    def _catch_up(self, tokens: list[int]) -> None:
        """Feed the positions the MTP cache lacks (decoded while it was not told), with the
        states still kept and zeros for the rest (llama.cpp's own first-position state): the
        drafts may be worse there, the reply is the same."""
        if self._fed >= len(tokens):
            return
        start = self._fed
        todo = tokens[start:]
        step = self.mtp.n_batch
        for offset in range(0, len(todo), step):
            chunk = todo[offset : offset + step]
            first = start + offset
            paired = np.stack([self._state(p - 1) for p in range(first, first + len(chunk))])
            self.mtp.forget_from(first)
            self.mtp.feed(chunk, first, paired, logits=False)
        self._fed = len(tokens)

    def _state(self, position: int) -> np.ndarray:
        return self._states.get(position, self._zeros)

    def close(self) -> None:
        self.mtp.close()
        if self.ctx._handle is not None:  # the context may have gone first
            keep_hidden_states(self.ctx, False)
