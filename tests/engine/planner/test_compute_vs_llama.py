"""The compute-buffer model against llama.cpp's own reserve (CPU backend, recorded by
record_llama_cpu.py), and the CUDA-only terms against the formulas they come from."""

from __future__ import annotations

import dataclasses

import pytest

from engine.gguf import read_model_info
from engine.planner import Config, build_profile, estimate
from engine.planner.backends import BACKENDS
from engine.planner.compute import DeviceWork, device_compute, stages
from tests.engine.planner.conftest import MIB

CUDA = BACKENDS["cuda"]
SYNTHETIC = ("llama3-8b", "gemma3-12b", "qwen3-30b-a3b", "mistral-7b", "mixtral-8x7b")
# The model takes the allocator's high-water mark as a sum of live tensors; ggml-alloc's
# placement adds up to one activation row block (n_ubatch x n_embd x 4 bytes) here and there.
TOLERANCE_MIB = 8.1


def _config(row: dict) -> Config:
    return Config(
        n_ctx=row["n_ctx"],
        type_k=row["kv_type"],
        type_v=row["kv_type"],
        flash_attn=row["flash_attn"] == "on",
        n_ubatch=row["n_ubatch"],
    )


@pytest.mark.parametrize("shape", SYNTHETIC)
def test_cpu_compute_buffer_matches_llama_cpp(synthetic_profile, measurements, shape) -> None:
    profile = synthetic_profile(shape, "Q4_K_M")
    worst = 0.0
    for row in measurements[shape]:
        predicted = estimate(profile, _config(row), []).host.compute / MIB
        logged = row["compute_mib"]["CPU"]
        worst = max(worst, abs(predicted - logged))
        assert predicted == pytest.approx(logged, abs=TOLERANCE_MIB), row
    print(f"{shape}: worst compute-buffer error {worst:.2f} MiB")


@pytest.fixture(scope="module")
def real_profiles(starter_model, gemma_model):
    return {
        "smollm2-135m-q4_1": build_profile(read_model_info(starter_model)),
        "gemma3-270m-q4_k_m": build_profile(read_model_info(gemma_model)),
    }


@pytest.mark.parametrize("model", ["smollm2-135m-q4_1", "gemma3-270m-q4_k_m"])
def test_real_small_models(real_profiles, measurements, model) -> None:
    """Loaded for real on the CPU: weights, KV and compute buffers as llama.cpp logged them."""
    profile = real_profiles[model]
    for row in measurements[model]:
        est = estimate(profile, _config(row), [])
        kv = est.host.kv / MIB
        assert kv == pytest.approx(row["kv_buffer_mib"]["CPU"], abs=0.01), row
        compute = est.host.compute / MIB
        assert compute == pytest.approx(row["compute_mib"]["CPU"], abs=TOLERANCE_MIB), row
        # weights: all of them in one CPU buffer (no mmap); the tied output shares the
        # embedding's data in host memory, as with mmap
        weights = est.host.weights / MIB
        assert weights == pytest.approx(row["model_buffer_mib"]["CPU"], rel=0.002), row


def test_flash_attention_converts_quantized_kv_to_f16_in_prompt_batches(synthetic_profile):
    """ggml_cuda_flash_attn_ext_get_alloc_size: the node also holds f16 copies of a quantized
    K and V (the MMA/tile kernels read f16), n_kv x width x 2 bytes each."""
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    n_cells = (131072, 131072)
    f16 = stages(profile, n_cells, 512, True, "f16", "f16", 0, CUDA)
    q8 = stages(profile, n_cells, 512, True, "q8_0", "q8_0", 0, CUDA)
    assert q8.attn_full - f16.attn_full == 2 * 131072 * 1024 * 2
    on_cpu = stages(profile, n_cells, 512, True, "q8_0", "q8_0", 0, BACKENDS["cpu"])
    assert on_cpu.attn_full == f16.attn_full
    work = DeviceWork(has_layers=True, has_swa=False, has_full=True, runs_output=True)
    # at 128k the converted cache outgrows the logits: the attention stage sets the buffer
    assert device_compute(q8, work, profile.n_embd) > device_compute(f16, work, profile.n_embd)


def test_partial_offload_copies_host_weights_into_the_first_gpu(synthetic_profile) -> None:
    """A host layer's prompt batch runs on GPU 0: its largest weight and its K and V are
    copied there, next to the usual activations."""
    profile = synthetic_profile("mistral-7b", "Q4_K_M")
    base = Config(n_ctx=32768, n_gpu_layers=33)
    s = stages(profile, (32768, 32768), 512, True, "f16", "f16", 0, CUDA)
    full = estimate(profile, base, [CUDA]).gpus[0].compute
    assert full == max(s.output, s.masks + s.ffn, s.masks + s.attn_full)
    part = estimate(profile, dataclasses.replace(base, n_gpu_layers=20), [CUDA]).gpus[0].compute
    largest = max(w.largest_dense for w in profile.layer_weights(CUDA)[:13])
    kv_copy = 32768 * 1024 * 2 * 2  # one host layer's K and V, f16
    assert s.kv_copy_full == kv_copy
    assert part == max(s.masks + s.attn_full + kv_copy + largest, s.masks + s.ffn + largest)
    assert part > full + largest


def test_small_batches_are_not_offloaded(synthetic_profile) -> None:
    """Below 32 tokens a prompt batch stays where its weights are (op_offload_min_batch)."""
    profile = synthetic_profile("mistral-7b", "Q4_K_M")
    config = Config(n_ctx=8192, n_gpu_layers=10, n_ubatch=16)
    offloaded = estimate(profile, dataclasses.replace(config, n_ubatch=32), [CUDA])
    kept = estimate(profile, config, [CUDA])
    assert kept.gpus[0].compute < offloaded.gpus[0].compute / 2


def test_experts_kept_in_ram_are_copied_whole(synthetic_profile) -> None:
    profile = synthetic_profile("qwen3-30b-a3b", "Q4_K_M")
    base = Config(n_ctx=4096, n_gpu_layers=49)
    moved = estimate(profile, dataclasses.replace(base, n_cpu_expert_layers=10), [CUDA])
    kept = estimate(profile, base, [CUDA])
    largest = max(w.largest_expert for w in profile.layer_weights(CUDA)[-10:])
    stage = stages(profile, (4096, 4096), 512, True, "f16", "f16", 0, CUDA)
    expected = max(stage.output, stage.masks + stage.ffn + largest)
    assert moved.gpus[0].compute == expected
    assert kept.gpus[0].compute == stage.output


def test_lean_outputs_shrink_the_output_stage(synthetic_profile) -> None:
    profile = synthetic_profile("gemma3-12b", "Q4_K_M")
    config = Config(n_ctx=4096, n_gpu_layers=49)
    default = estimate(profile, config, [CUDA]).gpus[0].compute
    lean = estimate(profile, dataclasses.replace(config, n_outputs_max=1), [CUDA]).gpus[0].compute
    assert default / MIB == pytest.approx(527.0, abs=0.1)
    assert lean < default - 400 * MIB
