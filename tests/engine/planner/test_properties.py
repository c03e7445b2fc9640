"""Properties over random devices and requests: more memory never gives a worse plan, a plan
never exceeds its budget, and the breakdown accounts for every weight."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.planner import PlanRequest, plan_profiles
from engine.planner.search import Search, rank_key
from tests.engine.planner.conftest import GIB, MIB, gpu

SHAPES = ("llama3-8b", "gemma3-12b", "qwen3-30b-a3b")
QUANT_SETS = (("Q4_K_M",), ("Q8_0",), ("Q8_0", "Q4_K_M"), ("Q6_K", "Q3_K_M"))
FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

requests = st.builds(
    dict,
    preference=st.sampled_from(("quality", "context", "speed")),
    target_ctx=st.sampled_from((4096, 8192, 32768, 65536, 131072)),
    min_ctx=st.sampled_from((512, 2048, 4096)),
    kv_types=st.sampled_from((("f16",), ("f16", "q8_0"), ("f16", "q8_0", "q4_0"))),
    flash_attn=st.sampled_from(("auto", "on", "off")),
    allow_cpu_layers=st.booleans(),
    host_budget_bytes=st.sampled_from((None, 16 * GIB, 64 * GIB)),
)


def _best_key(profiles, req: PlanRequest):
    search = Search(req)
    search.run(profiles)
    if not search.candidates:
        return None
    key = rank_key(req, search.target_ctx)
    best = max(search.candidates, key=key)
    return key(best)[:-1]  # without the "leaner is better" tie-break, which depends on budget


@FAST
@given(
    shape=st.sampled_from(SHAPES),
    quants=st.sampled_from(QUANT_SETS),
    vram=st.integers(3 * 1024, 40 * 1024),
    extra=st.integers(64, 16 * 1024),
    options=requests,
)
def test_more_memory_never_gives_a_worse_plan(
    synthetic_profile, shape, quants, vram, extra, options
) -> None:
    profiles = [synthetic_profile(shape, q) for q in quants]
    small = PlanRequest(gpus=(gpu(vram / 1024),), **options)
    large = dataclasses.replace(small, gpus=(gpu((vram + extra) / 1024),))
    small_key, large_key = _best_key(profiles, small), _best_key(profiles, large)
    if small_key is not None:
        assert large_key is not None
        assert large_key >= small_key


@FAST
@given(
    shape=st.sampled_from(SHAPES),
    quants=st.sampled_from(QUANT_SETS),
    vrams=st.lists(st.integers(2 * 1024, 48 * 1024), min_size=0, max_size=3),
    options=requests,
)
def test_a_plan_never_exceeds_its_budget(synthetic_profile, shape, quants, vrams, options) -> None:
    profiles = [synthetic_profile(shape, q) for q in quants]
    gpus = tuple(gpu(v / 1024, name=f"gpu{i}") for i, v in enumerate(vrams))
    plan = plan_profiles(profiles, PlanRequest(gpus=gpus, **options))
    if not plan.fits:
        assert plan.choice is None and plan.settings is None and plan.reasons
        return
    for device in plan.devices:
        if device.budget_bytes is not None:
            assert device.total_bytes <= device.budget_bytes, device
    c = plan.choice
    assert c.n_ctx >= min(options["min_ctx"], options["target_ctx"])
    assert c.n_ctx <= max(options["target_ctx"], 256)
    assert c.type_k in options["kv_types"]


@FAST
@given(
    shape=st.sampled_from(SHAPES),
    quants=st.sampled_from(QUANT_SETS),
    vram=st.integers(2 * 1024, 48 * 1024),
    options=requests,
)
def test_the_breakdown_accounts_for_every_weight(
    synthetic_profile, shape, quants, vram, options
) -> None:
    profiles = [synthetic_profile(shape, q) for q in quants]
    plan = plan_profiles(profiles, PlanRequest(gpus=(gpu(vram / 1024),), **options))
    if not plan.fits:
        return
    profile = next(p for p in profiles if p.source == plan.choice.source)
    weights = sum(d.weights_bytes for d in plan.devices)
    file_bytes = profile.info.weight_bytes
    assert weights >= file_bytes * 0.9999  # nothing lost (host alignment may round down a hair)
    duplicate = profile.output_matrix_bytes(profile_backend()) if profile.tied_embeddings else 0
    # at most: the file, the tied output stored again, and 128-byte alignment + one padded row
    # per tensor
    slack = len(profile.info.tensors) * 24 * 1024
    assert weights <= file_bytes + duplicate + slack
    for d in plan.devices:
        parts = d.weights_bytes + d.kv_bytes + d.compute_bytes + d.overhead_bytes
        assert d.total_bytes == parts and min(parts, d.kv_bytes, d.compute_bytes) >= 0
    if plan.choice.n_gpu_layers and plan.devices[0].kv_bytes == 0:
        assert plan.choice.n_gpu_layers == 1  # only the output layer: no cache on the GPU
    assert plan.devices[-1].overhead_bytes >= 512 * MIB  # the engine process itself


def profile_backend():
    from engine.planner.backends import BACKENDS

    return BACKENDS["cuda"]
