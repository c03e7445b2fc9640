"""The load policy on the command line: flags are the person's choice (used if they fit, refused
with the reason if not), else the remembered choice, else the best fit; nothing that does not fit
is ever loaded."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys

import pytest

from engine.cli.planning import add_load_arguments, add_projector_argument, plan_from_command_line
from engine.session import PlanSource, RememberedChoice, RememberedSettings
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.engine.session.conftest import cpu, machine, nvidia

GAMING_PC = machine(nvidia(11.5, 12), cpu(24))


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_load_arguments(parser)
    add_projector_argument(parser)
    return parser.parse_args(list(argv))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-models")
    return write_sparse_gguf(folder / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")


def plan(path, *argv, remembered=None):
    err = io.StringIO()
    decision = plan_from_command_line(path, args(*argv), GAMING_PC, err=err, remembered=remembered)
    return decision, err.getvalue()


def test_flags_that_fit_are_what_loads(llama, tmp_path):
    decision, err = plan(llama, "--ctx", "16384", "--kv", "q8_0", remembered=None)
    assert decision.source == PlanSource.CHOSEN
    assert (decision.params.n_ctx, decision.params.type_k) == (16384, "q8_0")
    assert "16,384 tokens · q8_0 KV" in err


def test_flags_that_do_not_fit_are_refused_with_what_would(llama):
    decision, err = plan(llama, "--ctx", "16777216")  # the most --ctx takes (engine.cli.numbers)
    assert decision is None
    assert "16,777,216 tokens" in err and "more on" in err
    assert "What fits: 8,192 tokens" in err


def test_an_engine_that_cannot_run_here_is_refused_with_its_reason(llama):
    """--engine hearth on a machine without a GPU: the reason, not a memory shortfall."""
    err = io.StringIO()
    asked = args("--ctx", "4096")
    asked.engine = "hearth"
    decision = plan_from_command_line(llama, asked, machine(cpu(24)), err=err, remembered=None)
    assert decision is None
    assert "ask for the Hearth engine, which cannot run it here" in err.getvalue()
    assert "more on" not in err.getvalue() and "needs  than" not in err.getvalue()


def test_without_flags_the_remembered_choice_then_the_best_fit(llama, tmp_path):
    remembered = RememberedSettings(tmp_path / "s.json")
    decision, _ = plan(llama, remembered=remembered)
    assert decision.source == PlanSource.BEST_FIT and decision.params.n_ctx == 8192
    remembered.put(llama, RememberedChoice(n_ctx=12288, kv_type="q4_0"))
    decision, _ = plan(llama, remembered=remembered)
    assert decision.source == PlanSource.CHOSEN and decision.params.n_ctx == 12288


def test_hearth_chat_refuses_a_model_that_fits_nowhere(tmp_path):
    """The real command, on this machine: a header-only Mixtral bigger than its RAM."""
    import psutil

    mixtral = write_sparse_gguf(tmp_path / "mixtral.gguf", SHAPES["mixtral-8x7b"], "Q8_0")
    if mixtral.stat().st_size < psutil.virtual_memory().total:
        pytest.skip("this machine has more RAM than the test's model")
    run = subprocess.run(
        [sys.executable, "-m", "app.launcher", "chat", str(mixtral), "--prompt", "hi"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 1
    assert "mixtral.gguf does not fit on this computer" in run.stderr
    assert "more on system RAM" in run.stderr


def test_serve_suggests_fewer_tokens_only_where_that_helps(llama, tmp_path):
    from engine.cli.planning import fewer_tokens_hint

    small_pc = machine(cpu(6))  # the 8B's 4.6 GiB fit, with room for 512 tokens
    assert fewer_tokens_hint(llama, small_pc, n_ctx=65536, parallel=4) == (
        "Try fewer --parallel requests than 4 or a shorter --ctx than 65536."
    )
    assert fewer_tokens_hint(llama, small_pc, n_ctx=65536, parallel=1) == (
        "Try a shorter --ctx than 65536."
    )
    tiny_pc = machine(cpu(3))  # not even the weights: fewer tokens cannot help
    assert fewer_tokens_hint(llama, tiny_pc, n_ctx=65536, parallel=4) == ""


def test_a_refusal_reads_as_one_sentence(tmp_path):
    from engine.session import plan_load

    mixtral = write_sparse_gguf(tmp_path / "mixtral.gguf", SHAPES["mixtral-8x7b"], "Q8_0")
    text = plan_load(mixtral, machine(cpu(30))).refusal()
    assert "It would fit with a Q4_K_M file of this model (about" in text
    assert text.count("would fit") == 1, text


def test_serve_on_the_hearth_engine_plans_the_hearth_engine_for_n_sequences(llama):
    """`hearth serve --engine hearth --parallel 4 --ctx 2048`: the choice names the Hearth
    engine and the plan counts four sequences' pages."""
    from engine.cli.planning import engine_for_context

    chosen = argparse.Namespace(ctx=4 * 2048, kv=None, gpu_layers=None, engine="hearth")
    err = io.StringIO()
    decision = plan_from_command_line(llama, chosen, GAMING_PC, err=err, n_parallel=4)
    assert decision is not None, err.getvalue()
    assert (decision.params.engine, decision.params.n_ctx) == ("hearth", 8192)
    asked = dict(n_ctx=8192, n_parallel=4)
    assert engine_for_context(llama, GAMING_PC, asked="hearth", **asked) == "hearth"
    assert engine_for_context(llama, GAMING_PC, asked="llama", **asked) == "llama"
    # auto: no GPU, no Hearth engine
    assert engine_for_context(llama, machine(cpu(64)), asked="auto", **asked) == "llama"


def test_fill_gpu_fills_the_card_and_passes_over_a_remembered_choice(tmp_path):
    mistral = write_sparse_gguf(tmp_path / "mistral.gguf", SHAPES["mistral-7b"], "Q4_K_M")
    remembered = RememberedSettings(tmp_path / "s.json")
    remembered.put(mistral, RememberedChoice(n_ctx=4096))
    decision, _ = plan(mistral, "--fill-gpu", remembered=remembered)
    assert decision.source == PlanSource.BEST_FIT
    assert decision.params.n_ctx == 32768  # its training context, on the 12 GiB card


@pytest.mark.parametrize(
    ("argv", "words"),
    [(("--ctx", "4096"), "leave out --ctx"), (("--kv", "q8_0", "--gpu-layers", "3"),
                                              "leave out --kv, --gpu-layers")],
)  # fmt: skip
def test_fill_gpu_with_a_chosen_context_is_refused(llama, argv, words):
    decision, err = plan(llama, "--fill-gpu", *argv)
    assert decision is None and "--fill-gpu chooses the context itself" in err and words in err


def test_a_projector_named_on_the_command_line_is_loaded_and_said(llama, tmp_path):
    from testkit.tiny_vision import write_tiny_projector

    projector = write_tiny_projector(tmp_path / "elsewhere-mmproj.gguf", text_embd=4096)
    decision, err = plan(llama, "--mmproj", str(projector))
    assert decision.params.mmproj_path == str(projector)
    assert "The vision projector takes" in err
    wrong = write_tiny_projector(tmp_path / "wrong-mmproj.gguf", text_embd=576)
    decision, err = plan(llama, "--mmproj", str(wrong))
    assert decision.params.mmproj_path == "" and "does not go with this model" in err


def test_an_engine_that_ends_before_it_is_ready_is_said_so_with_its_last_words():
    """The worker fails at start (a missing library, a broken build): the command says so and
    quotes it, instead of planning a load for an engine that is gone."""
    import os

    from engine.cli.planning import EngineDidNotStart, machine_after_start
    from engine.runtime.client import EngineClient, EventQueue

    events = EventQueue()
    client = EngineClient(events, env={**os.environ, "HEARTH_WORKER_FAULT": "exit_before_ready"})
    client.start()
    try:
        with pytest.raises(EngineDidNotStart, match=r"status 3.*exiting before ready"):
            machine_after_start(events, 60)
    finally:
        client.close()
