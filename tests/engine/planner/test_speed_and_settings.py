"""The bandwidth model of decode speed, and the load settings a plan hands the worker."""

from __future__ import annotations

import re

import pytest

from engine.planner import Config, LoadSettings, expert_override_pattern
from engine.planner.backends import BACKENDS, DECODE_OVERHEAD_S
from engine.planner.memory import layer_ranges
from engine.planner.speed import bytes_read_per_token, tokens_per_second

CUDA, CPU = BACKENDS["cuda"], BACKENDS["cpu"]


def _read(profile, config: Config, gpus=(CUDA,), kv=True):
    n = profile.n_layer
    ngl = min(config.n_gpu_layers, n + 1) if gpus else 0
    return bytes_read_per_token(
        profile, config, layer_ranges(n, ngl, (ngl,) if gpus else ()), gpus, kv
    )


def test_all_on_gpu_reads_every_weight_but_the_embeddings(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    config = Config(n_ctx=8192, n_gpu_layers=33)
    per_gpu, host = _read(profile, config, kv=False)
    layers = sum(w.dense for w in profile.layer_weights(CUDA))
    assert per_gpu == [layers + profile.output_matrix_bytes(CUDA)] and host == 0
    tps = tokens_per_second(per_gpu, host, [CUDA], [500.0], None)
    assert tps == pytest.approx(
        1 / (per_gpu[0] / (500e9 * CUDA.decode_efficiency) + DECODE_OVERHEAD_S)
    )


def test_the_cache_is_read_at_half_the_context(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    config = Config(n_ctx=8192, n_gpu_layers=33)
    with_kv, _ = _read(profile, config)
    without, _ = _read(profile, config, kv=False)
    assert with_kv[0] - without[0] == 4096 * 131072  # 128 KiB per token, half of 8192 tokens


def test_each_layer_moved_to_ram_makes_decode_slower(synthetic_profile) -> None:
    profile = synthetic_profile("llama3-8b", "Q8_0")
    speeds = []
    for ngl in (33, 30, 20, 10, 1, 0):
        per_gpu, host = _read(profile, Config(n_ctx=4096, n_gpu_layers=ngl))
        speeds.append(tokens_per_second(per_gpu, host, [CUDA], [500.0], 50.0))
    assert speeds == sorted(speeds, reverse=True) and speeds[0] > 5 * speeds[-1]


def test_moe_reads_only_the_active_experts(synthetic_profile) -> None:
    profile = synthetic_profile("qwen3-30b-a3b", "Q4_K_M")
    per_gpu, _ = _read(profile, Config(n_ctx=4096, n_gpu_layers=49), kv=False)
    layers = profile.layer_weights(CUDA)
    dense = sum(w.dense for w in layers) + profile.output_matrix_bytes(CUDA)
    experts = sum(w.experts for w in layers)
    assert per_gpu[0] == pytest.approx(dense + experts * 8 / 128, rel=1e-6)
    _, host = _read(profile, Config(n_ctx=4096, n_gpu_layers=49, n_cpu_expert_layers=48), kv=False)
    cpu_experts = sum(w.experts for w in profile.layer_weights(CPU))
    assert host == pytest.approx(cpu_experts * 8 / 128, rel=1e-6)


def test_unknown_bandwidth_falls_back_to_conservative_figures() -> None:
    slow = tokens_per_second([10**9], 10**9, [CUDA], [None], None)
    fast = tokens_per_second([10**9], 10**9, [CUDA], [1000.0], 100.0)
    assert 0 < slow < fast


@pytest.mark.parametrize("layers", [[1], [40, 41, 47], [3, 30]])
def test_expert_pattern_matches_only_those_layers(layers) -> None:
    pattern = re.compile(expert_override_pattern(layers))
    for il in range(48):
        for kind in ("up", "down", "gate", "gate_up"):
            name = f"blk.{il}.ffn_{kind}_exps.weight"
            assert bool(pattern.search(name)) == (il in layers), name
        assert not pattern.search(f"blk.{il}.ffn_up.weight")
        assert not pattern.search(f"blk.{il}.ffn_gate_inp.weight")
        assert bool(pattern.search(f"blk.{il}.ffn_down_chexps.weight")) == (il in layers)


def test_load_settings_map_onto_model_params() -> None:
    settings = LoadSettings(
        path="/m.gguf",
        n_ctx=32768,
        n_gpu_layers=49,
        flash_attn="on",
        type_k="q8_0",
        type_v="q8_0",
        n_ubatch=512,
        tensor_split=(20.0, 29.0),
        tensor_buft_overrides=((r"blk\.(47)\.ffn_(up|down|gate_up|gate)_(ch|)exps", "CPU"),),
        swa_full=False,
        n_outputs_max=1,
    )
    params = settings.model_params()
    assert (params.path, params.n_ctx, params.n_gpu_layers, params.flash_attn) == (
        "/m.gguf",
        32768,
        49,
        "on",
    )
    assert (params.type_k, params.type_v, params.n_ubatch, params.n_batch) == (
        "q8_0",
        "q8_0",
        512,
        2048,
    )
    extra = settings.extra_params()
    assert extra["tensor_split"] == [20.0, 29.0] and extra["n_outputs_max"] == 1
    assert extra["tensor_buft_overrides"][0][1] == "CPU" and extra["swa_full"] is False
    assert settings.to_dict()["tensor_split"] == [20.0, 29.0]
