"""Where llama.cpp puts each tensor, and what that costs per device (llama-model.cpp
load_tensors: input on the CPU, output layer offloaded first, then the last layers)."""

from __future__ import annotations

import pytest

from engine.gguf import read_model_info
from engine.planner import Config, build_profile, estimate
from engine.planner.backends import BACKENDS
from engine.planner.memory import layer_counts
from engine.planner.profile import alloc_bytes

CPU, CUDA = BACKENDS["cpu"], BACKENDS["cuda"]


def _weights(profile, ngl: int, experts: int = 0, gpus=(CUDA,)):
    config = Config(n_ctx=2048, n_gpu_layers=ngl, n_cpu_expert_layers=experts)
    return estimate(profile, config, list(gpus))


def test_cuda_alloc_pads_rows_and_aligns(gemma_model) -> None:
    info = read_model_info(gemma_model)
    t = info.tensor("blk.0.attn_output.weight")  # Q4_K, rows of 1024: no padding
    assert alloc_bytes(t, CUDA) == -(-t.n_bytes // 128) * 128
    t = info.tensor("blk.0.attn_q.weight")  # Q5_0, rows of 640 = 512 + 128: 384 values more
    assert t.shape[0] == 640 and t.type_name == "Q5_0"
    pad_row = 384 // 32 * 22
    assert alloc_bytes(t, CUDA) == -(-(t.n_bytes + pad_row) // 128) * 128
    norm = info.tensor("blk.0.attn_norm.weight")  # F32 is never padded, only aligned
    assert alloc_bytes(norm, CUDA) == 2560 and alloc_bytes(norm, CPU) == 2560


def test_no_layers_offloaded_keeps_everything_in_ram(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    est = _weights(profile, 0)
    assert est.gpus[0].weights == 0 and est.gpus[0].kv == 0
    assert est.host.weights == pytest.approx(profile.info.weight_bytes, rel=1e-4)


def test_one_gpu_layer_is_the_output_layer(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    est = _weights(profile, 1)
    assert est.gpus[0].weights == profile.output_bytes(CUDA)
    assert est.gpus[0].kv == 0  # no repeating layer, so no cache on the GPU
    assert est.layer_ranges == ((32, 33),)


def test_the_last_layers_are_offloaded(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    layers = profile.layer_weights(CUDA)
    est = _weights(profile, 5)  # the output layer and layers 28..31
    expected = profile.output_bytes(CUDA) + sum(w.dense for w in layers[28:32])
    assert est.gpus[0].weights == expected
    assert est.layer_ranges == ((28, 33),)
    assert est.gpus[0].kv == 4 * 2048 * 131072 // 32  # 4 layers' caches


def test_token_embeddings_never_leave_ram(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    est = _weights(profile, 33)
    embd = profile.info.tensor("token_embd.weight")
    assert est.host.weights == alloc_bytes(embd, CPU)


def test_tied_embeddings_are_stored_again_for_the_output(synthetic_profile) -> None:
    profile = synthetic_profile("gemma3-12b", "Q4_K_M")
    assert profile.tied_embeddings
    embd = profile.info.tensor("token_embd.weight")
    est = _weights(profile, 49)
    assert est.host.weights == alloc_bytes(embd, CPU)
    norm = profile.info.tensor("output_norm.weight")
    assert profile.output_bytes(CUDA) == alloc_bytes(embd, CUDA) + alloc_bytes(norm, CUDA)
    total = est.host.weights + est.gpus[0].weights
    assert total > profile.info.weight_bytes + embd.n_bytes * 0.99


@pytest.mark.parametrize("shape", ["llama3-8b", "gemma3-12b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("ngl", [0, 1, 2, 17, 48, 49, 60])
def test_every_weight_is_somewhere(synthetic_profile, shape: str, ngl: int) -> None:
    """Host + GPU weights = the file (counted with the host's alignment), plus the CUDA
    padding, plus the duplicated output of a tied model when the output layer is offloaded."""
    profile = synthetic_profile(shape, "Q4_K_M")
    est = _weights(profile, ngl)
    n = profile.n_layer
    n_gpu = min(ngl, n + 1)
    cpu_layers = profile.layer_weights(CPU)
    cuda_layers = profile.layer_weights(CUDA)
    padding = sum(
        c.dense + c.experts - h.dense - h.experts
        for c, h in zip(cuda_layers[n + 1 - n_gpu :], cpu_layers[n + 1 - n_gpu :], strict=True)
    )
    output_padding = profile.output_bytes(CUDA) - profile.output_bytes(CPU) if n_gpu else 0
    duplicate = profile.output_matrix_bytes(CPU) if profile.tied_embeddings and n_gpu else 0
    host_total = (
        profile.input_bytes(CPU)
        + profile.output_bytes(CPU)
        - (profile.output_matrix_bytes(CPU) if profile.tied_embeddings else 0)
    )
    host_total += sum(w.dense + w.experts for w in cpu_layers)
    assert (
        est.host.weights + est.gpus[0].weights == host_total + padding + output_padding + duplicate
    )


def test_experts_of_the_last_layers_stay_in_ram(synthetic_profile) -> None:
    profile = synthetic_profile("qwen3-30b-a3b", "Q4_K_M")
    all_gpu = _weights(profile, 49)
    moved = _weights(profile, 49, experts=10)
    cuda_experts = sum(w.experts for w in profile.layer_weights(CUDA)[38:48])
    cpu_experts = sum(w.experts for w in profile.layer_weights(CPU)[38:48])
    assert all_gpu.gpus[0].weights - moved.gpus[0].weights == cuda_experts
    assert moved.host.weights - all_gpu.host.weights == cpu_experts
    assert moved.gpus[0].kv == all_gpu.gpus[0].kv  # attention stays on the GPU


def test_expert_count_is_ignored_for_dense_models(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    assert (
        _weights(profile, 33, experts=10).gpus[0].weights == _weights(profile, 33).gpus[0].weights
    )


@pytest.mark.parametrize(
    ("n", "gpus", "weights", "expected"),
    [
        (33, 1, None, (33,)),
        (33, 2, None, (17, 16)),
        (33, 2, [3.0, 1.0], (25, 8)),
        (10, 3, [1.0, 1.0, 1.0], (4, 3, 3)),
        (0, 2, None, (0, 0)),
    ],
)
def test_layer_counts(n, gpus, weights, expected) -> None:
    assert layer_counts(n, gpus, weights) == expected


def test_two_gpus_split_layers_and_the_output_goes_to_the_last(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    config = Config(n_ctx=4096, n_gpu_layers=33, gpu_layer_counts=(20, 13))
    est = estimate(profile, config, [CUDA, CUDA])
    assert est.layer_ranges == ((0, 20), (20, 33))
    layers = profile.layer_weights(CUDA)
    assert est.gpus[0].weights == sum(w.dense for w in layers[:20])
    assert est.gpus[1].weights == sum(w.dense for w in layers[20:]) + profile.output_bytes(CUDA)
    assert est.gpus[0].kv == 20 * 4096 * 4096 and est.gpus[1].kv == 12 * 4096 * 4096


def test_counts_that_do_not_add_up_are_refused(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    with pytest.raises(ValueError):
        estimate(
            profile, Config(n_ctx=4096, n_gpu_layers=33, gpu_layer_counts=(20, 10)), [CUDA, CUDA]
        )


def test_unknown_architecture_gets_a_padded_compute_estimate(synthetic_info) -> None:
    import dataclasses

    info = synthetic_info("llama3-8b", "Q4_K_M")
    known = build_profile(info)
    strange = build_profile(dataclasses.replace(info, architecture="brand-new-arch"))
    assert not strange.known_architecture and strange.notes
    config = Config(n_ctx=4096, n_gpu_layers=33)
    a, b = estimate(known, config, [CUDA]), estimate(strange, config, [CUDA])
    assert b.gpus[0].compute > 1.4 * a.gpus[0].compute
    assert b.gpus[0].weights == a.gpus[0].weights and b.gpus[0].kv == a.gpus[0].kv
