"""Drafting with a second, small model of the same vocabulary (LM Studio's and koboldcpp's
"draft model"): it decodes greedily ahead of the main model, which checks its guesses.

The draft model sits on the same device as the main model (all its layers on the GPU when the
main model has any there) with a context as long as the main one, and keeps its own KV cache in
step with the reply: each step it computes only the tokens it has not seen, after dropping its
rejected guesses. It stops guessing early when it is unsure (its top token below `p_min`, the
0.75 of llama.cpp's own draft loop), since a guess it doubts is seldom kept.

It runs on the main model's engine where that engine can run it (a Hearth-engine model gets a
Hearth-engine draft, on the same device), else on llama.cpp, through the engine seam either way
(engine_api.py: decode, step, forget_from).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from engine.enums import Engine
from engine.llama.driver import EngineError
from engine.runtime.engine_api import Context, Model, StepOutput
from engine.runtime.protocol import ModelParams

# llama.cpp's common/speculative.cpp: vocabularies may differ by this many (padding) tokens,
# and their texts are compared from this id on (the first few are control tokens).
VOCAB_SIZE_SLACK = 128
VOCAB_CHECK_FROM = 5


def vocabulary_mismatch(target: Model, draft: Model) -> str | None:
    """Why `draft`'s tokens cannot stand for `target`'s, or None when they can."""
    if target.vocab_type() != draft.vocab_type():
        return "it uses another kind of tokenizer"
    if abs(target.n_vocab - draft.n_vocab) > VOCAB_SIZE_SLACK:
        return f"its vocabulary has {draft.n_vocab} tokens, the model's {target.n_vocab}"
    if target.adds_bos() != draft.adds_bos() or target.special_tokens() != draft.special_tokens():
        return "its special tokens (BOS, EOS, end of turn, padding) differ"
    for token in range(VOCAB_CHECK_FROM, min(target.n_vocab, draft.n_vocab)):
        if target.token_source_text(token) != draft.token_source_text(token):
            ours, theirs = draft.token_text(token), target.token_text(token)
            return f"token {token} is {ours!r} in it, not {theirs!r}"
    return None


class DraftModel:
    name = "draft_model"

    def __init__(self, model: Model, ctx: Context, *, n_target_vocab: int, p_min: float = 0.75):
        self.model, self.ctx, self.p_min = model, ctx, p_min
        self.n_target_vocab = n_target_vocab  # a padding token beyond it is no draft
        self.cached: list[int] = []
        self._out: StepOutput | None = None  # the output after the last cached token

    @classmethod
    def open(cls, params: ModelParams, target: Model) -> DraftModel:
        path = params.speculative.draft_path
        if not path:
            raise EngineError("No draft model was chosen; choose its GGUF file.")
        draft_params = replace(
            params,
            path=path,
            n_gpu_layers=-1 if params.n_gpu_layers != 0 else 0,  # the main model's device
            tensor_split=(),
            cpu_tensors=(),
            speculative=replace(params.speculative, method="off"),
        )
        model = _open_draft(draft_params, target.engine)
        why = vocabulary_mismatch(target, model)
        if why:
            model.close()
            raise EngineError(
                f"The draft model {os.path.basename(path)} cannot draft for this model: {why}. "
                "Choose a small model of the same family (the same tokenizer)."
            )
        try:
            # its logits are read here (the greedy guess and its probability), not sampled
            ctx = model.new_context(replace(draft_params, backend_sampling=False))
        except EngineError:
            model.close()
            raise
        return cls(model, ctx, n_target_vocab=target.n_vocab)

    def begin(self, prompt: list[int]) -> None:
        pass  # the cache is matched against the tokens at each step

    def propose(self, tokens: list[int], n: int) -> list[int]:
        if n <= 0:
            return []
        self._catch_up(tokens)
        drafts: list[int] = []
        while True:
            token, p_top = self._top()
            if p_top < self.p_min or token >= self.n_target_vocab:
                break
            drafts.append(token)
            if len(drafts) >= n or len(self.cached) + 1 >= self.ctx.info.n_ctx:
                break
            self._out = self.ctx.step(token)
            self.cached.append(token)
        return drafts

    def decoded(self, tokens: list[int], position: int) -> None:
        pass  # the draft keeps its own cache in step from the tokens (propose)

    def _catch_up(self, tokens: list[int]) -> None:
        """Make the draft's cache hold `tokens`: keep the common prefix, compute the rest (at
        least the last token, whose logits give the first guess)."""
        keep = 0
        limit = min(len(self.cached), len(tokens) - 1)
        while keep < limit and self.cached[keep] == tokens[keep]:
            keep += 1
        if keep < len(self.cached) and not self.ctx.forget_from(keep):
            self.ctx.clear()
            keep = 0
        self._out = self.ctx.decode(tokens[keep:])
        self.cached = list(tokens)

    def _top(self) -> tuple[int, float]:
        """The draft's most likely next token and its probability: from the logits its engine
        hands back (the Hearth engine's tensor), or that llama.cpp keeps."""
        out = self._out
        if out is not None and out.logits is not None:
            import torch

            logits = out.logits.float()
            best = int(torch.argmax(logits))
            return best, 1.0 / float(torch.exp(logits - logits[best]).sum())
        logits = np.ctypeslib.as_array(self.ctx.logits_of_last(), shape=(self.model.n_vocab,))
        best = int(logits.argmax())
        p_top = 1.0 / float(np.exp(logits - logits[best]).sum())
        return best, p_top

    def close(self) -> None:
        self.ctx.close()
        self.model.close()


def _open_draft(params: ModelParams, engine: Engine) -> Model:
    """The draft on the main model's engine where it can run there, else on llama.cpp."""
    if engine == Engine.HEARTH:
        from engine.runtime.hearth_driver import HearthModel
        from engine.runtime.hearth_load import HearthUnavailable

        try:
            return HearthModel(replace(params, engine=Engine.HEARTH))
        except HearthUnavailable:
            pass  # an architecture or tensor type it does not run: llama.cpp drafts
    from engine.runtime.llama_engine import LlamaModel

    return LlamaModel(replace(params, engine=Engine.LLAMA))
