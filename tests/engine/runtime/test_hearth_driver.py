"""The Hearth engine behind the worker protocol: load, generate, KV reuse, stops, and the
fallback to llama.cpp with a reason."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")
from engine.runtime import engine_output
from engine.runtime import protocol as p
from engine.runtime.greedy_check import STORY
from tests.engine.hearth.tiny_models import TinySpec, write_tiny_gguf
from tests.engine.runtime.conftest import GREEDY, RunningEngine


@pytest.fixture(scope="module")
def starter(starter_model) -> str:
    return str(starter_model)


CPU_ENV = {**os.environ, "HEARTH_ENGINE_DEVICE": "cpu"}
HEARTH = dict(engine="hearth", n_ctx=512, n_threads=1)  # one thread: shared CI cores


@pytest.fixture(scope="module")
def hearth_engine(starter):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_output, "TAIL_LINES_KEPT", 10_000)  # the worker's every line
        running = RunningEngine(env=CPU_ENV)
    loaded = running.load(starter, **HEARTH)
    assert isinstance(loaded, p.ModelLoaded), loaded
    running.loaded = loaded
    running.lines_after_load = running.client.last_lines()
    yield running
    running.close()


def test_the_worker_runs_the_hearth_engine(hearth_engine):
    loaded = hearth_engine.loaded
    assert (loaded.engine, loaded.engine_note) == ("hearth", "")
    assert loaded.n_layers == 30 and loaded.n_vocab == 49152 and loaded.n_ctx == 512
    assert "Hearth engine" in loaded.description
    # the engine's imports were made after Ready, in the background, and the load found them
    # made or waited for them (engine/runtime/hearth_prewarm.py)
    lines = hearth_engine.lines_after_load
    assert any("hearth worker: Hearth engine imported ahead of a load in" in x for x in lines)
    texts, done = hearth_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=8)
    assert isinstance(done, p.GenerationDone), done
    assert done.stop_reason == "max_tokens" and done.stats.n_generated == 8
    # the CPU build of llama.cpp says the same up to its first near-tie (test_real_models.py)
    assert "".join(texts).startswith(" there was a wise old w")


def test_a_later_turn_reuses_the_cache_and_says_what_a_fresh_start_says(hearth_engine, starter):
    first = (p.ChatMessage(role="user", content="Name a colour."),)
    texts, _ = hearth_engine.run(messages=first, sampling=GREEDY, max_tokens=6)
    second = (
        *first,
        p.ChatMessage(role="assistant", content="".join(texts)),
        p.ChatMessage(role="user", content="Another one?"),
    )
    reused_texts, reused = hearth_engine.run(messages=second, sampling=GREEDY, max_tokens=6)
    assert reused.stats.n_prompt_tokens_reused > 10

    fresh_engine = RunningEngine(env=CPU_ENV)
    try:
        assert isinstance(fresh_engine.load(starter, **HEARTH), p.ModelLoaded)
        fresh_texts, fresh = fresh_engine.run(messages=second, sampling=GREEDY, max_tokens=6)
    finally:
        fresh_engine.close()
    assert fresh.stats.n_prompt_tokens_reused == 0
    assert "".join(reused_texts) == "".join(fresh_texts)


def test_embeddings_on_the_hearth_engine_are_refused_with_what_to_do(hearth_engine):
    """The Hearth engine declares no embeddings: the request is refused before any work (it
    used to build a llama.cpp context on the vocabulary-only model)."""
    request_id = hearth_engine.client.embed(("a sentence",))
    event = hearth_engine.events.wait_for(p.GenerationFailed, p.Embedded, timeout=60)
    assert isinstance(event, p.GenerationFailed) and event.request_id == request_id
    assert "Embeddings run on the llama.cpp engine only" in event.message
    assert "Hearth engine" in event.message and "--engine llama" in event.message


def test_a_grammar_on_the_hearth_engine_is_refused_not_ignored(hearth_engine):
    """Its sampler has no grammar: structured output would silently not follow the schema."""
    constrained = p.SamplingParams(temperature=0.0, grammar='root ::= "yes" | "no"')
    texts, done = hearth_engine.run(prompt=STORY, sampling=constrained, max_tokens=4)
    assert isinstance(done, p.GenerationFailed) and texts == []
    assert "Structured output" in done.message and "llama.cpp engine" in done.message


def test_stop_strings_end_the_reply(hearth_engine):
    texts, done = hearth_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=16, stop=("wizard",))
    assert done.stop_reason == "stop_string"
    assert "".join(texts) == " there was a wise old "


def test_seeded_sampling_repeats_itself(hearth_engine):
    sampling = p.SamplingParams(temperature=1.0, seed=42)
    first, _ = hearth_engine.run(prompt=STORY, sampling=sampling, max_tokens=8)
    again, _ = hearth_engine.run(prompt=STORY, sampling=sampling, max_tokens=8)
    assert "".join(first) == "".join(again)


def _load_without_a_gpu(starter, **params):
    """The worker's answer to a load that asks for the Hearth engine on a machine without a
    GPU (HEARTH_ENGINE_DEVICE unset: the CPU is not taken for one), and the lines it printed."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("there is a GPU here: the Hearth engine runs")
    env = {k: v for k, v in os.environ.items() if k != "HEARTH_ENGINE_DEVICE"}
    running = RunningEngine(env=env)
    try:
        return running.load(starter, **params), running.client.last_lines()
    finally:
        running.close()


def test_without_a_gpu_the_worker_falls_back_to_llama_cpp_and_says_why(starter, monkeypatch):
    monkeypatch.setattr(engine_output, "TAIL_LINES_KEPT", 10_000)
    loaded, lines = _load_without_a_gpu(starter, **HEARTH)
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.engine == "llama"
    assert "Hearth engine unavailable, using llama.cpp: no CUDA" in loaded.engine_note
    # nothing of the Hearth engine was imported ahead where it cannot run
    assert "hearth worker: Hearth engine not imported ahead: no NVIDIA GPU visible to NVML" in lines
    assert not any("imported ahead of a load" in line for line in lines)


def test_a_fallback_with_hearth_kv_formats_loads_with_llama_cpps_nearest(starter):
    """The plan chose the Hearth engine with its own KV formats; llama.cpp has none of them:
    it holds q8_0 for q8 and q4_0 for rot4."""
    loaded, _ = _load_without_a_gpu(starter, **{**HEARTH, "type_k": "q8", "type_v": "rot4"})
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.engine == "llama"
    assert (loaded.type_k, loaded.type_v) == ("q8_0", "q4_0")


def test_unsupported_architecture_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    from engine.runtime.hearth_driver import HearthModel
    from engine.runtime.hearth_load import HearthUnavailable

    monkeypatch.setenv("HEARTH_ENGINE_DEVICE", "cpu")
    path = write_tiny_gguf(tmp_path / "phi2.gguf", TinySpec(arch="phi2"))
    with pytest.raises(HearthUnavailable, match="architecture 'phi2' is not one"):
        HearthModel(p.ModelParams(path=str(path), engine="hearth"))


def test_missing_torch_is_a_reason(tmp_path, monkeypatch, starter):
    from engine.runtime import hearth_driver as driver
    from engine.runtime.hearth_load import HearthUnavailable

    monkeypatch.setattr(driver, "torch_missing_reason", lambda: "PyTorch is not installed")
    with pytest.raises(HearthUnavailable, match="PyTorch is not installed"):
        driver.HearthModel(p.ModelParams(path=starter, engine="hearth"))


def test_a_cache_type_it_does_not_hold_fails_the_load_with_advice(starter):
    running = RunningEngine(env=CPU_ENV)
    try:
        failed = running.load(starter, **HEARTH, type_k="q4_0", type_v="q4_0")
    finally:
        running.close()
    assert isinstance(failed, p.LoadFailed), failed
    assert "f16" in failed.message and "llama.cpp engine" in failed.message


def test_kernels_cache_formats_need_a_gpu(starter, monkeypatch):
    from engine.llama.driver import EngineError
    from engine.runtime.hearth_driver import HearthModel

    monkeypatch.setenv("HEARTH_ENGINE_DEVICE", "cpu")
    params = p.ModelParams(path=starter, engine="hearth", n_ctx=64, type_k="q8", type_v="rot4")
    model = HearthModel(params)
    try:
        with pytest.raises(EngineError, match="q8/rot4 KV cache runs on kernels/ on a GPU"):
            model.new_context(params)
    finally:
        model.close()


def test_out_of_gpu_memory_while_computing_ends_the_worker_with_advice(monkeypatch, capsys):
    """torch's OOM mid-step ends the process (the GUI offers a smaller plan when a worker
    dies), after one line that says what happened and what to do."""
    import torch

    from engine.runtime import hearth_driver

    def exit_now(status):
        raise SystemExit(status)

    monkeypatch.setattr(hearth_driver.os, "_exit", exit_now)
    oom = hearth_driver.worker_ends_when_out_of_memory("decoding")
    with pytest.raises(SystemExit) as ended, oom:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert ended.value.code == hearth_driver.OUT_OF_MEMORY_EXIT
    line = capsys.readouterr().err.strip()
    assert line.startswith("hearth worker: error: the GPU ran out of memory while decoding")
    assert "Tried to allocate 2.00 GiB" in line and "shorter context" in line
