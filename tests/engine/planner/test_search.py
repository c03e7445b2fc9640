"""The search: table-driven scenarios on consumer cards, the constraints every plan keeps, and
plans that do not fit."""

from __future__ import annotations

import dataclasses
import re

import pytest

from engine.planner import DOES_NOT_FIT, FITS, LOW, Config, Planner, estimate
from engine.planner.backends import BACKENDS
from engine.planner.profile import EXPERT_TENSOR
from tests.engine.planner.conftest import GIB, gpu, request

CUDA = BACKENDS["cuda"]

# (shape, quants offered, GiB, preference, target ctx) -> what the plan must look like
SCENARIOS = [
    # Llama-3-8B Q4_K_M (4.6 GiB) on a 24 GB card: everything on the GPU, f16 cache, full target
    ("llama3-8b", ("Q4_K_M",), 24, "quality", 32768, {"all_gpu": True, "ctx": 32768, "kv": "f16"}),
    # and Q8_0 when it is offered: the better file still fits entirely
    ("llama3-8b", ("Q8_0", "Q4_K_M"), 24, "quality", 32768, {"quant": "Q8_0", "all_gpu": True}),
    # on an 8 GB card Q8_0 still runs above reading speed with 5 layers in RAM...
    ("llama3-8b", ("Q8_0", "Q4_K_M"), 8, "quality", 8192, {"quant": "Q8_0", "min_tps": 10}),
    # ... on a 6 GB card it would not: Q4_K_M, entirely on the GPU
    ("llama3-8b", ("Q8_0", "Q4_K_M"), 6, "quality", 8192, {"quant": "Q4_K_M", "all_gpu": True}),
    # speed: the smaller file, all on the GPU
    ("llama3-8b", ("Q8_0", "Q4_K_M"), 12, "speed", 8192, {"quant": "Q4_K_M", "all_gpu": True}),
    # context on 8 GB: 32k is reached, by quantizing the cache or moving layers to RAM
    ("llama3-8b", ("Q4_K_M",), 8, "context", 32768, {"ctx": 32768}),
    # Gemma-3-12B's window keeps 40 of 48 layers' caches small: 32k fits on 12 GB
    ("gemma3-12b", ("Q4_K_M",), 12, "quality", 32768, {"all_gpu": True, "ctx": 32768}),
    # Qwen3-30B-A3B Q4_K_M (17 GiB) on 12 GB: all layers on the GPU, experts partly in RAM
    ("qwen3-30b-a3b", ("Q4_K_M",), 12, "quality", 16384, {"experts_in_ram": True, "ngl_all": True}),
    ("qwen3-30b-a3b", ("Q4_K_M",), 24, "speed", 16384, {"all_gpu": True}),
]


def _plan(synthetic_info, shape, quants, gib, preference, target, **options):
    infos = [synthetic_info(shape, q) for q in quants]
    req = request(gpu(gib), preference=preference, target_ctx=target, **options)
    return Planner(infos).plan(req)


@pytest.mark.parametrize(("shape", "quants", "gib", "preference", "target", "expect"), SCENARIOS)
def test_scenarios(synthetic_info, shape, quants, gib, preference, target, expect) -> None:
    plan = _plan(synthetic_info, shape, quants, gib, preference, target)
    assert plan.status == FITS, plan.reasons
    c = plan.choice
    n = c.n_layers
    if "quant" in expect:
        assert c.quant == expect["quant"]
    if expect.get("all_gpu"):
        assert c.n_gpu_layers == n + 1 and c.n_cpu_expert_layers == 0
    if expect.get("ngl_all"):
        assert c.n_gpu_layers == n + 1
    if expect.get("experts_in_ram"):
        assert 0 < c.n_cpu_expert_layers < n
    if "ctx" in expect:
        assert c.n_ctx == expect["ctx"]
    if "kv" in expect:
        assert c.type_k == c.type_v == expect["kv"]
    if "min_tps" in expect:
        assert plan.tokens_per_second >= expect["min_tps"]


@pytest.mark.parametrize("gib", [6, 8, 10, 12, 16, 24])
@pytest.mark.parametrize("shape", ["llama3-8b", "gemma3-12b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("preference", ["quality", "context", "speed"])
def test_every_plan_keeps_the_rules(synthetic_info, shape, gib, preference) -> None:
    plan = _plan(synthetic_info, shape, ("Q8_0", "Q4_K_M"), gib, preference, 65536, min_ctx=4096)
    if not plan.fits:
        return
    c, s = plan.choice, plan.settings
    assert c.n_ctx % 256 == 0 and 4096 <= c.n_ctx <= 65536
    assert c.type_k == c.type_v, "mixed K/V pairs fall back to slow f16 conversion on CUDA"
    if c.type_v != "f16":
        assert c.flash_attn, "a quantized V cache needs flash attention"
    assert s.flash_attn in ("on", "off")  # never "auto": llama.cpp could turn it off
    for device in plan.devices:
        assert device.budget_bytes is None or device.total_bytes <= device.budget_bytes
    assert s.model_params().n_ctx == c.n_ctx and s.n_gpu_layers == c.n_gpu_layers


def test_expert_override_names_exactly_the_experts_of_the_chosen_layers(synthetic_info) -> None:
    info = synthetic_info("qwen3-30b-a3b", "Q4_K_M")
    plan = Planner(info).plan(request(gpu(12), target_ctx=8192))
    c, s = plan.choice, plan.settings
    assert c.n_cpu_expert_layers > 0 and len(s.tensor_buft_overrides) == 1
    pattern, buft = s.tensor_buft_overrides[0]
    assert buft == "CPU"
    matched = {t.name for t in info.tensors if re.search(pattern, t.name)}
    first = c.n_layers - c.n_cpu_expert_layers
    expected = {t.name for t in info.tensors if EXPERT_TENSOR.match(t.name) and t.layer >= first}
    assert matched == expected and len(expected) == 3 * c.n_cpu_expert_layers


def test_two_gpus_share_the_layers(synthetic_info) -> None:
    info = synthetic_info("llama3-8b", "Q8_0")
    req = request(gpu(6, name="a"), gpu(6, name="b"), target_ctx=16384)
    plan = Planner(info).plan(req)
    assert plan.fits
    assert len(plan.settings.tensor_split) == 2
    assert sum(plan.choice.gpu_layer_counts) == plan.choice.n_gpu_layers == 33
    assert all(d.total_bytes <= d.budget_bytes for d in plan.devices[:2])


def test_without_a_gpu_everything_runs_from_ram(synthetic_info) -> None:
    plan = Planner(synthetic_info("llama3-8b", "Q4_K_M")).plan(request(target_ctx=8192))
    assert plan.fits and plan.choice.n_gpu_layers == 0
    assert len(plan.devices) == 1 and plan.devices[0].id == "host"
    assert plan.devices[0].weights_bytes >= synthetic_info("llama3-8b", "Q4_K_M").weight_bytes


def test_a_model_that_cannot_fit_says_so_with_nearest_options(synthetic_info) -> None:
    info = synthetic_info("qwen3-30b-a3b", "Q8_0")
    req = request(gpu(4), host_budget_bytes=16 * GIB, target_ctx=8192)
    plan = Planner(info).plan(req)
    assert plan.status == DOES_NOT_FIT and plan.choice is None and plan.settings is None
    assert "system RAM" in plan.reasons[0]
    kinds = {a.kind for a in plan.alternatives}
    assert "more_memory" in kinds
    more = next(a for a in plan.alternatives if a.kind == "more_memory")
    assert more.shortfall_bytes > 0


def test_offloading_forbidden_shows_what_offloading_would_do(synthetic_info) -> None:
    info = synthetic_info("llama3-8b", "Q8_0")
    req = request(gpu(6), target_ctx=8192, allow_cpu_layers=False)
    plan = Planner(info).plan(req)
    assert plan.status == DOES_NOT_FIT
    offload = [a for a in plan.alternatives if a.kind == "cpu_offload"]
    assert offload and offload[0].choice.n_gpu_layers < 33


def test_context_below_the_minimum_is_offered_when_nothing_else_fits(synthetic_info) -> None:
    info = synthetic_info("llama3-8b", "Q4_K_M")
    req = request(gpu(6.3), target_ctx=131072, min_ctx=131072, allow_cpu_layers=False)
    plan = Planner(info).plan(req)
    assert plan.status == DOES_NOT_FIT
    shorter = [a for a in plan.alternatives if a.kind == "shorter_context"]
    assert shorter and 256 <= shorter[0].choice.n_ctx < 131072


def test_unknown_architecture_is_low_confidence(synthetic_info) -> None:
    info = dataclasses.replace(synthetic_info("llama3-8b", "Q4_K_M"), architecture="mystery")
    plan = Planner(info).plan(request(gpu(24), target_ctx=8192))
    assert plan.fits and plan.confidence == LOW and plan.notes


def test_a_file_without_dimensions_gets_a_plan_not_an_exception(synthetic_info) -> None:
    info = dataclasses.replace(
        synthetic_info("llama3-8b", "Q4_K_M"), block_count=0, layer_weight_bytes=(), tensors=()
    )
    plan = Planner(info).plan(request(gpu(24)))
    assert plan.status == DOES_NOT_FIT and plan.reasons


def test_bad_requests_are_programming_errors(synthetic_info) -> None:
    planner = Planner(synthetic_info("llama3-8b", "Q4_K_M"))
    with pytest.raises(ValueError):
        planner.plan(request(gpu(8), preference="fastest"))
    with pytest.raises(ValueError):
        planner.plan(request(gpu(8), kv_types=("q5_1",)))


def test_flash_attention_off_keeps_f16_cache(synthetic_info) -> None:
    planner = Planner(synthetic_info("llama3-8b", "Q4_K_M"))
    plan = planner.plan(request(gpu(8), flash_attn="off", target_ctx=32768))
    assert plan.fits and not plan.choice.flash_attn and plan.choice.type_v == "f16"


def test_the_plan_breakdown_is_the_memory_model_of_its_choice(synthetic_info) -> None:
    info = synthetic_info("gemma3-12b", "Q4_K_M")
    plan = Planner(info).plan(request(gpu(10), target_ctx=32768))
    c = plan.choice
    config = Config(
        n_ctx=c.n_ctx,
        type_k=c.type_k,
        type_v=c.type_v,
        flash_attn=c.flash_attn,
        n_gpu_layers=c.n_gpu_layers,
        n_cpu_expert_layers=c.n_cpu_expert_layers,
        n_outputs_max=plan.settings.n_outputs_max,
    )
    from engine.planner import build_profile

    est = estimate(build_profile(info), config, [CUDA])
    device = plan.devices[0]
    assert (device.weights_bytes, device.kv_bytes, device.compute_bytes, device.overhead_bytes) == (
        est.gpus[0].weights,
        est.gpus[0].kv,
        est.gpus[0].compute,
        est.gpus[0].overhead,
    )


def test_lean_outputs_buy_context(synthetic_info) -> None:
    planner = Planner(synthetic_info("gemma3-12b", "Q4_K_M"))
    base = request(gpu(8), preference="context", target_ctx=131072, min_ctx=2048)
    plain = planner.plan(dataclasses.replace(base, lean_outputs=False))
    lean = planner.plan(dataclasses.replace(base, lean_outputs=True))
    assert lean.settings.n_outputs_max == 1 and plain.settings.n_outputs_max == 0
    assert (lean.choice.n_ctx, lean.choice.n_gpu_layers) >= (plain.choice.n_ctx, 0)


def test_request_for_detected_devices() -> None:
    from engine.hardware import Device
    from engine.planner import request_for_devices, safety_margin

    gpu_device = Device(
        id="nvidia:0", vendor="nvidia", name="RTX 4070", kind="gpu", backends=("cuda", "vulkan"),
        source="nvml", total_bytes=12 * GIB, free_bytes=11 * GIB, memory_bandwidth_gbps=504.0,
    )  # fmt: skip
    cpu = Device(
        id="cpu", vendor="amd", name="Ryzen", kind="cpu", backends=("cpu",), source="psutil",
        total_bytes=32 * GIB, free_bytes=20 * GIB,
    )  # fmt: skip
    req = request_for_devices([gpu_device, cpu], target_ctx=8192)
    assert len(req.gpus) == 1 and req.gpus[0].backend == "cuda"
    assert req.gpus[0].budget_bytes == 11 * GIB - safety_margin(12 * GIB)
    assert req.gpus[0].bandwidth_gbps == 504.0
    assert req.host_budget_bytes == 20 * GIB and req.target_ctx == 8192
    other_card = request_for_devices([gpu_device, cpu], vram_bytes=8 * GIB)
    assert other_card.gpus[0].budget_bytes == 8 * GIB - safety_margin(12 * GIB)
    apple = dataclasses.replace(
        gpu_device, kind="igpu", backends=("metal",), unified_memory=True,
        gpu_memory_limit_bytes=10 * GIB,
    )  # fmt: skip
    unified = request_for_devices([apple, cpu])
    assert unified.gpus[0].backend == "metal" and unified.host_budget_bytes is None
    assert unified.gpus[0].budget_bytes == 10 * GIB - safety_margin(12 * GIB)


def test_a_smaller_quantization_is_suggested_when_it_would_fit(synthetic_info) -> None:
    planner = Planner(synthetic_info("llama3-8b", "Q8_0"))
    plan = planner.plan(request(gpu(7), allow_cpu_layers=False, target_ctx=4096, min_ctx=4096))
    assert plan.status == DOES_NOT_FIT
    smaller = [a for a in plan.alternatives if a.kind == "smaller_quant"]
    assert smaller and "Q4_K_M" in smaller[0].summary
    # and the real Q4_K_M file does fit there
    q4 = Planner(synthetic_info("llama3-8b", "Q4_K_M"))
    assert q4.plan(request(gpu(7), allow_cpu_layers=False, target_ctx=4096, min_ctx=4096)).fits
    # no such suggestion when the file is that small already
    tiny_card = q4.plan(request(gpu(3), allow_cpu_layers=False, target_ctx=4096, min_ctx=4096))
    assert not [a for a in tiny_card.alternatives if a.kind == "smaller_quant"]
