"""The CPU threads llama.cpp computes with when none are asked for: a step of one token (a
reply's decode) on the physical cores but one (engine/hardware/cpu_probe.engine_threads), a
prompt's batches on all of them. ggml's threads spin at every operation until all of them
arrive, so a decode on every core stalls whenever the window or another program runs: a
400-token reply on 2 cores beside one busy process took minutes instead of seconds."""

import llama_cpp.llama_cpp as C
import pytest

from engine.hardware import cpu_probe
from engine.llama import driver as llama
from engine.llama.params import ContextSettings, ModelSettings


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 3), (16, 15)])
def test_the_engine_leaves_a_core_to_the_rest_of_the_computer(monkeypatch, cores, threads):
    monkeypatch.setattr(cpu_probe, "physical_cores", lambda: cores)
    assert cpu_probe.engine_threads() == threads


def test_a_context_decodes_on_all_cores_but_one_and_reads_prompts_on_all(
    starter_model, monkeypatch
):
    monkeypatch.setattr(cpu_probe, "physical_cores", lambda: 4)  # llama_threads reads it
    model = llama.Model(ModelSettings(path=str(starter_model), n_gpu_layers=0))
    ctx = None
    try:
        ctx = llama.Context(model, ContextSettings(n_ctx=256, n_batch=256))  # n_threads=0
        assert C.llama_n_threads(ctx.handle) == 3  # one token a step: the decode
        assert C.llama_n_threads_batch(ctx.handle) == 4  # a prompt's batches
        asked = llama.Context(model, ContextSettings(n_ctx=256, n_batch=256, n_threads=2))
        try:
            assert C.llama_n_threads(asked.handle) == 2  # the person's count, for both
            assert C.llama_n_threads_batch(asked.handle) == 2
        finally:
            asked.close()
    finally:
        if ctx is not None:
            ctx.close()
        model.close()
