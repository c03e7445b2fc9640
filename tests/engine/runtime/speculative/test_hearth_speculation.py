"""Speculative decoding on the Hearth engine (CPU, the real starter model): prompt lookup's
greedy reply is plain decoding's, token for token, with the cache left as plain decoding leaves
it; in one process, no worker."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")

from engine.enums import Engine
from engine.runtime import protocol as p
from engine.runtime.generation import Session
from engine.runtime.hearth_driver import HearthModel
from engine.runtime.hearth_load import DEVICE_ENV
from engine.runtime.speculative.setup import open_speculation
from tests.engine.runtime.speculative.test_decode_loop import (
    REWRITE,
    _AlwaysDraft,
    _both,
)

MAX_DRAFT = 4  # every check costs MAX_DRAFT + 1 one-row products here: a bounded test


@pytest.fixture(scope="module")
def hearth_session(starter_model):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DEVICE_ENV, "cpu")
        params = p.ModelParams(
            path=str(starter_model),
            n_ctx=256,
            n_threads=1,
            engine="hearth",
            speculative=p.SpeculativeParams(method="prompt_lookup", max_draft=MAX_DRAFT),
        )
        model = HearthModel(params)
        session = Session(model=model, ctx=model.new_context(params))
        session.speculation, note = open_speculation(params, model, session.ctx)
        assert session.speculation is not None, note
        session.speculation.length = _AlwaysDraft(max_length=MAX_DRAFT)
        yield session
        session.close()


def test_the_hearth_engine_declares_speculation_for_a_dense_model(hearth_session):
    assert hearth_session.model.engine == Engine.HEARTH
    assert hearth_session.model.capabilities.speculative


def test_prompt_lookup_gives_plain_decoding_s_greedy_reply(hearth_session):
    prompt = hearth_session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(hearth_session, prompt, max_tokens=12)
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert fast.stats.n_draft_accepted > 0  # drafts were checked and kept, not only plain steps
    assert text.startswith("def add_numbers(first, second):")  # a real reply, not noise


def test_mtp_is_refused_on_the_hearth_engine_with_what_to_choose(hearth_session):
    model, ctx = hearth_session.model, hearth_session.ctx
    params = p.ModelParams(path="x", engine="hearth", speculative=p.SpeculativeParams(method="mtp"))
    spec, note = open_speculation(params, model, ctx)
    assert spec is None
    assert "MTP drafting runs on the llama.cpp engine only" in note and "prompt lookup" in note


@pytest.mark.parametrize("cost", [1.3, 3.9])
def test_auto_is_prompt_lookup_where_the_trial_says_checks_pay(
    hearth_session, monkeypatch, tmp_path, cost
):
    from engine.runtime.speculative import trial

    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))  # where trials are remembered
    measured = []

    def fake_measure(ctx, prompt):
        measured.append(len(prompt))
        return trial.TrialResult(0.01, cost)

    monkeypatch.setattr(trial, "measure", fake_measure)
    model, ctx = hearth_session.model, hearth_session.ctx
    params = p.ModelParams(path=model.params.path, engine="hearth", n_ctx=256,
                           speculative=p.SpeculativeParams(method="auto"))  # fmt: skip
    for _ in range(2):  # the second load remembers the first one's trial
        spec, note = open_speculation(params, model, ctx)
        if cost < trial.ON_BELOW:
            assert note == "" and spec.drafter.name == "prompt_lookup"
            assert spec.why == f"on: a check of 4 drafts costs {cost} plain steps here"
            spec.close()
        else:
            assert spec is None
            assert note.startswith(f"Speculative decoding off: a check of 4 drafts costs {cost}")
    assert len(measured) == 1


@pytest.fixture(scope="module")
def tiny_with_starter_vocabulary(tmp_path_factory, starter_model):
    """A tiny random llama with the starter model's tokenizer: a target and its draft that
    load in a second on the Hearth engine's CPU path."""
    from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

    path = tmp_path_factory.mktemp("tiny") / "tiny-llama.gguf"
    spec = tiny_spec("llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=64)
    return write_tiny_gguf(path, spec, vocab_from=starter_model)


def test_a_draft_model_drafts_on_the_hearth_engine_and_keeps_the_reply(
    tiny_with_starter_vocabulary, monkeypatch
):
    """The draft runs on the main model's engine (the Hearth engine here), checked through the
    seam: the same greedy reply as plain decoding; a model drafting for itself keeps every
    draft it dares (its guesses are the model's own choices)."""
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    path = str(tiny_with_starter_vocabulary)
    params = p.ModelParams(
        path=path, n_ctx=128, n_threads=1, engine="hearth",
        speculative=p.SpeculativeParams(method="draft_model", draft_path=path, max_draft=3),
    )  # fmt: skip
    model = HearthModel(params)
    session = Session(model=model, ctx=model.new_context(params))
    try:
        session.speculation, note = open_speculation(params, model, session.ctx)
        assert session.speculation is not None, note
        drafter = session.speculation.drafter
        assert drafter.model.engine == Engine.HEARTH
        drafter.p_min = 0.0  # random weights are never sure: draft anyway
        session.speculation.length = _AlwaysDraft(max_length=3)
        prompt = model.tokenize("Once upon a time", add_special=True)
        (text, _, cache), (text_s, fast, cache_s) = _both(
            session, prompt, max_tokens=12, ignore_eos=True
        )
        assert (text_s, cache_s) == (text, cache)
        assert fast.stats.n_drafted > 0
        assert fast.stats.n_draft_accepted == fast.stats.n_drafted
    finally:
        session.close()


def test_on_a_gpu_its_plain_steps_are_the_stats_line_s_baseline(hearth_session, monkeypatch):
    """The Hearth engine samples alike with backend sampling asked or not: on a GPU its loop's
    plain steps price a reply's speed-up (on llama.cpp that depends on the context's sampling:
    test_setup.py)."""
    from engine.runtime.speculative import setup as speculation_setup

    monkeypatch.setattr(speculation_setup, "layers_on_gpu", lambda asked, n_layers: n_layers)
    model, ctx = hearth_session.model, hearth_session.ctx
    params = p.ModelParams(path=model.params.path, engine="hearth", backend_sampling=True,
                           speculative=p.SpeculativeParams(method="prompt_lookup"))  # fmt: skip
    spec, note = open_speculation(params, model, ctx)
    try:
        assert spec.pad_drafts and spec.comparable_baseline, note
        assert spec.greedy_caveat == ""  # and its greedy text is plain decoding's
    finally:
        spec.close()
