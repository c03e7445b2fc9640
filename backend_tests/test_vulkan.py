"""The Vulkan build of the engine on Mesa's software Vulkan device (lavapipe): all layers on the
device, flash attention on, and the same greedy tokens as the CPU build.

Run by `make test-vulkan`, which builds the Vulkan variant into .venv-vulkan and sets
HEARTH_CPU_PYTHON to the CPU build's interpreter (the reference) and GGML_VK_VISIBLE_DEVICES=0
(llama.cpp leaves CPU-type Vulkan devices out unless they are named).
"""

import os
import subprocess

from engine.runtime import protocol as p
from engine.starter_model import starter_model_path
from tests.engine.runtime.conftest import GREEDY, RunningEngine

STORY = "Once upon a time, in a small village by the sea,"
N_TOKENS = 32


def cpu_build_reply() -> str:
    python = os.environ["HEARTH_CPU_PYTHON"]
    cmd = [python, "-m", "app.launcher", "chat", "--raw", "--prompt", STORY, "--temp", "0"]
    cmd += ["--max-tokens", str(N_TOKENS), "--ctx", "1024"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    return done.stdout.removesuffix("\n")


def test_all_layers_on_the_vulkan_device_with_flash_attention_match_the_cpu_build():
    engine = RunningEngine()
    try:
        ready_devices = engine_devices(engine)
        assert any(name.startswith("Vulkan") for name in ready_devices), ready_devices
        loaded = engine.load(
            str(starter_model_path()), n_ctx=1024, n_gpu_layers=-1, flash_attn="on"
        )
        assert isinstance(loaded, p.ModelLoaded), loaded
        assert loaded.n_gpu_layers == loaded.n_layers
        on_device = [a for a in loaded.allocations if a.device.startswith("Vulkan")]
        assert sum(a.bytes for a in on_device if a.kind == "model") > 0.9 * loaded.size_bytes
        assert any(a.kind == "KV" for a in on_device)
        texts, done = engine.run(prompt=STORY, sampling=GREEDY, max_tokens=N_TOKENS)
        assert isinstance(done, p.GenerationDone) and done.stats.n_generated == N_TOKENS
    finally:
        engine.close()
    assert "".join(texts) == cpu_build_reply()


def engine_devices(engine: RunningEngine) -> list[str]:
    engine.client.request_memory_report()
    report = engine.events.wait_for(p.MemoryReport, timeout=60)
    return [d.name for d in report.devices]
