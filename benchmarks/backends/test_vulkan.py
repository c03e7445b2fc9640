"""The Vulkan build of the engine on Mesa's software Vulkan device (lavapipe): all layers on the
device, flash attention on, and the CPU build's greedy output by the rule of
engine/runtime/greedy_check.py (the same tokens, or a divergence only at a near-tie of the CPU
build's own logits, with every logit close to the CPU build's when fed the CPU build's tokens).

Run by `make test-vulkan`, which builds the Vulkan variant into .venv-vulkan and sets
HEARTH_CPU_PYTHON to the CPU build's interpreter (the reference) and GGML_VK_VISIBLE_DEVICES=0
(llama.cpp leaves CPU-type Vulkan devices out unless they are named). The comparison table is
printed; pytest shows it with -rP (test_vulkan.sh asks for it). The load uses the engine's
defaults, as the app does; the worker itself samples on the CPU on a software Vulkan device (see
the comment at the load).
"""

import os
import sys

import pytest

from engine.runtime import greedy_check
from engine.runtime import protocol as p
from engine.starter_model import starter_model_path
from tests.engine.runtime.conftest import GREEDY, RunningEngine


@pytest.mark.timeout(900)
def test_all_layers_on_the_vulkan_device_with_flash_attention_match_the_cpu_build():
    model = str(starter_model_path())
    reference = greedy_check.run_trace(os.environ["HEARTH_CPU_PYTHON"], model, n_gpu_layers=0)
    assert all(a["device"].startswith("CPU") for a in reference["allocations"]), reference

    engine = RunningEngine()
    try:
        ready_devices = engine_devices(engine)
        assert any(name.startswith("Vulkan") for name in ready_devices), ready_devices
        # With the sampler chain in the graph (backend sampling, the engine's default) lavapipe
        # crashed in about half of the runs, inside its own command execution
        # (docs/backends.md); the worker therefore samples on the CPU when the Vulkan device is
        # a software one (device_facts.software_vulkan). The greedy choice is the argmax of the
        # same logits either way.
        loaded = engine.load(model, n_ctx=1024, n_gpu_layers=-1, flash_attn="on")
        assert isinstance(loaded, p.ModelLoaded), loaded
        assert loaded.n_gpu_layers == loaded.n_layers
        on_device = [a for a in loaded.allocations if a.device.startswith("Vulkan")]
        assert sum(a.bytes for a in on_device if a.kind == "model") > 0.9 * loaded.size_bytes
        assert any(a.kind == "KV" for a in on_device)
        texts, done = engine.run(
            prompt=greedy_check.STORY, sampling=GREEDY, max_tokens=greedy_check.N_TOKENS
        )
        assert isinstance(done, p.GenerationDone), done
        assert done.stats.n_generated == greedy_check.N_TOKENS
    finally:
        engine.close()

    # Teacher-forced on the CPU build's tokens, in a child process like the engine's.
    forced = greedy_check.run_trace(sys.executable, model, n_gpu_layers=-1, reference=reference)
    assert any(
        a["device"].startswith("Vulkan") and a["kind"] == "model" for a in forced["allocations"]
    ), forced["allocations"]
    verdict = greedy_check.check(reference, forced, "".join(texts))
    print(verdict.report())
    assert verdict.passed, verdict.report()


def engine_devices(engine: RunningEngine) -> list[str]:
    engine.client.request_memory_report()
    report = engine.events.wait_for(p.MemoryReport, timeout=60)
    return [d.name for d in report.devices]
