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
        self._fed = 0  # the MTP cache matches the main one on positions [0, _fed)
        self._unfed: list[int] | None = []  # decoded since, not fed yet (None: not all known)
        keep_hidden_states(ctx)

    def begin(self, prompt: list[int]) -> None:
        pass  # the prompt's batches came through `decoded`

    def decoded(self, tokens: list[int], position: int) -> None:
        """Keep the states; the MTP cache is fed when a draft is asked for (in one batch with
        it), or when a batch's worth has piled up while drafting pauses."""
        if not tokens:
            return
        for row in range(len(tokens)):
            self._states[position + row] = hidden_state(self.ctx, row, self.n_embd)
        if position < self._fed:  # the main cache dropped these positions (a new prompt)
            self.mtp.forget_from(position)
            self._fed, self._unfed = position, []
        if self._unfed is None or position > self._fed + len(self._unfed):
            self._unfed = None  # tokens decoded without telling us: `propose` has them all
        else:
            self._unfed[position - self._fed :] = tokens
            if len(self._unfed) >= self.mtp.n_batch:
                self._feed(self._unfed, self._fed, logits=False)

    def propose(self, tokens: list[int], n: int) -> list[int]:
        if n <= 0:
            return []
        last = len(tokens) - 1  # the sampled token's position; the main model has the rest
        for start in range(self._fed, last, self.mtp.n_batch):  # catch up, a batch at a time
            self._feed(tokens[start : min(start + self.mtp.n_batch, last)], start, logits=False)
        self._feed([tokens[last]], last, logits=True)
        drafts: list[int] = []
        while True:
            drafts.append(int(self.mtp.logits_of_last().argmax()))
            state = self.mtp.last_hidden()
            if len(drafts) >= n or state is None:  # None: this llama.cpp hides the MTP state
                break
            self.mtp.feed(drafts[-1:], last + len(drafts), state[None, :], logits=True)
        self._fed = last + 1  # the drafts after it are dropped before the next feed
        for old in [p for p in self._states if p < last - KEPT_STATES]:
            del self._states[old]
        return drafts

    def _feed(self, tokens: list[int], position: int, *, logits: bool) -> None:
        """Put `tokens` at `position` on in the MTP cache, each with the main model's state at
        the position before it (zeros where none is kept: llama.cpp's own state for a
        position it never saw), after dropping whatever the cache held from there."""
        paired = np.stack(
            [self._states.get(p - 1, self._zeros) for p in range(position, position + len(tokens))]
        )
        self.mtp.forget_from(position)
        self.mtp.feed(tokens, position, paired, logits=logits)
        self._fed, self._unfed = position + len(tokens), []

    def close(self) -> None:
        self.mtp.close()
        if self.ctx._handle is not None:  # the context may have gone first
            keep_hidden_states(self.ctx, False)
