"""Plans for the Hearth engine: who it runs, the longest context per K/V pair, the choice."""

from __future__ import annotations

import dataclasses

import pytest

from engine.planner import DeviceBudget, Planner, PlanRequest
from engine.planner.hearth_memory import HearthConfig, hearth_estimate
from engine.planner.hearth_plan import (
    auto_pairs,
    hearth_profile,
    hearth_unavailable,
    longest_context,
    plan_hearth,
)
from engine.planner.manual import ManualChoice, plan_manual

GIB = 1024**3


def card(gib: float, backend: str = "cuda", cc: str | None = "8.9") -> PlanRequest:
    gpu = DeviceBudget("gpu0", f"{gib:g} GiB card", backend, int(gib * GIB), 1000.0, cc)
    return PlanRequest(gpus=(gpu,), host_budget_bytes=64 * GIB, target_ctx=131072,
                       preference="context")  # fmt: skip


@pytest.mark.parametrize(
    ("backend", "cc", "reason"),
    [
        ("cuda", "8.0", None),
        ("cuda", "9.0", None),
        ("cuda", None, None),  # not known: taken to be new enough, the worker checks again
        ("rocm", None, "ROCm"),
        ("cuda", "7.5", "compute capability 7.5"),
        ("metal", None, "Metal"),
        ("vulkan", None, "Vulkan"),
    ],
)
def test_which_devices(synthetic_info, backend, cc, reason):
    found = hearth_unavailable(synthetic_info("llama3-8b", "Q4_K_M"), card(24, backend, cc))
    assert found == reason if reason is None else reason in found


@pytest.mark.parametrize(
    ("shape", "quant", "reason"),
    [
        ("llama3-8b", "Q4_K_M", None),
        ("mistral-7b", "Q4_K_M", None),
        ("gemma3-12b", "Q4_K_M", None),
        # mixtures of experts: kernels' expert GEMV reads Q4_K/Q6_K and MXFP4 experts
        ("qwen3-30b-a3b", "Q4_K_M", None),
        ("mixtral-8x7b", "Q4_K_M", None),
        ("gpt-oss-20b", "MXFP4_MOE", None),
        # ... not Q3_K ones (Q3_K_M's gate and up)
        ("qwen3-30b-a3b", "Q3_K_M", "Q3_K experts (blk.0.ffn_gate_exps.weight) have no GPU"),
    ],
)
def test_which_models(synthetic_info, shape, quant, reason):
    found = hearth_unavailable(synthetic_info(shape, quant), card(24))
    assert found == reason if reason is None else reason in found


def test_no_gpu_no_hearth(synthetic_info):
    request = PlanRequest(host_budget_bytes=64 * GIB)
    assert "no GPU" in hearth_unavailable(synthetic_info("llama3-8b", "Q4_K_M"), request)


def test_sliding_window_models_get_the_paged_formats_too(synthetic_info):
    """kernels' paged attention takes Gemma 3's window (engine/hearth/capabilities.py)."""
    pairs = auto_pairs(hearth_profile(synthetic_info("gemma3-12b", "Q4_K_M")))
    assert ("f16", "f16") in pairs and ("rot4", "rot4") in pairs


def test_best_fit_never_picks_an_unusable_format(synthetic_info):
    pairs = auto_pairs(hearth_profile(synthetic_info("llama3-8b", "Q4_K_M")))
    assert ("f16", "f16") in pairs and ("rot4", "rot4") in pairs
    assert all(k != "rot2" for k, _ in pairs)  # K rot2: perplexity 82.6 against 24.1


@pytest.mark.parametrize("gib", [8, 10])  # 12 GiB holds the model's whole 128k context
def test_the_longest_context_is_the_last_that_fits(synthetic_info, gib):
    info = synthetic_info("llama3-8b", "Q4_K_M")
    request = card(gib)
    plan = plan_hearth(info, request)
    assert plan.fits and plan.choice.engine == plan.settings.engine == "hearth"
    c = plan.choice
    profile = hearth_profile(info)

    def total(n_ctx: int) -> int:
        return hearth_estimate(profile, HearthConfig(n_ctx, c.type_k, c.type_v)).gpus[0].total

    assert total(c.n_ctx) <= request.gpus[0].budget_bytes < total(c.n_ctx + 256)
    assert plan.devices[0].total_bytes == total(c.n_ctx)
    assert plan.settings.model_params().engine == "hearth"


def test_smaller_formats_fit_longer_contexts(synthetic_info):
    # 12.5 GiB: kivi4 keys reach the target as rot4 keys do beside the prefill graphs' pool
    # (kivi4's chunk keeps its rows: 3,072 positions short of it at 12 GiB)
    info = synthetic_info("llama3-8b", "Q4_K_M")
    plan = plan_hearth(info, card(12.5))
    pairs = (("f16", "f16"), ("q8", "q8"), ("q8", "rot4"), ("rot4", "rot4"), ("kivi4", "rot4"))
    longest = {pair: longest_context(info, card(12.5), *pair) for pair in pairs}
    # preference "context": the longest context, and at the same length the better quality:
    # kivi4 K holds as many positions as rot4 K (5 bits a value each) within llama.cpp q8_0's KL
    assert longest[("kivi4", "rot4")] == longest[("rot4", "rot4")]
    assert (plan.choice.type_k, plan.choice.type_v) == ("kivi4", "rot4")
    assert plan.choice.n_ctx == longest[("rot4", "rot4")]
    assert longest[("rot4", "rot4")] > longest[("q8", "rot4")] > longest[("q8", "q8")]
    assert longest[("q8", "q8")] > longest[("f16", "f16")] > 0


def test_a_pair_this_models_kv_check_found_hurting_is_not_picked(synthetic_info):
    info = synthetic_info("llama3-8b", "Q4_K_M")
    assert (plan_hearth(info, card(12.5)).choice.type_k, "rot4") == ("kivi4", "rot4")
    hurt = dataclasses.replace(card(12.5), hearth_pairs_left_out=(("kivi4", "rot4"),))
    plan = plan_hearth(info, hurt)
    assert plan.fits and (plan.choice.type_k, plan.choice.type_v) == ("rot4", "rot4")


def test_quality_preference_takes_the_better_pair_when_the_target_fits(synthetic_info):
    request = dataclasses.replace(card(24), target_ctx=8192, preference="quality")
    plan = plan_hearth(synthetic_info("llama3-8b", "Q4_K_M"), request)
    assert (plan.choice.type_k, plan.choice.type_v, plan.choice.n_ctx) == ("f16", "f16", 8192)


def test_a_card_too_small_says_so(synthetic_info):
    plan = plan_hearth(synthetic_info("llama3-8b", "Q4_K_M"), card(4))
    assert not plan.fits and "more on 4 GiB card" in plan.reasons[0]
    assert plan.alternatives[0].kind == "cpu_offload"


def test_an_unsupported_model_gets_the_reason(synthetic_info):
    plan = plan_hearth(synthetic_info("qwen3-30b-a3b", "Q3_K_M"), card(24))
    assert not plan.fits and "Q3_K experts" in plan.reasons[0]


def test_a_mixture_of_experts_plans_with_every_expert_on_the_gpu(synthetic_info):
    """Qwen3-30B-A3B Q4_K_M (17.3 GiB of weights) fits a 24 GiB card, with every expert on it."""
    plan = plan_hearth(synthetic_info("qwen3-30b-a3b", "Q4_K_M"), card(24))
    assert plan.fits
    assert plan.devices[0].weights_bytes > 17.2 * GIB


def manual_hearth(info, request, n_ctx, type_k, type_v):
    choice = ManualChoice(n_ctx=n_ctx, kv_type=type_k, type_v=type_v, engine="hearth")
    return plan_manual(Planner(info), request, choice)


def test_a_manual_choice_over_budget_says_where(synthetic_info):
    info = synthetic_info("llama3-8b", "Q4_K_M")
    fits = manual_hearth(info, card(24), 8192, "q8", "rot4")
    assert fits.fits and fits.settings.type_v == "rot4" and fits.settings.engine == "hearth"
    assert fits.config.n_gpu_layers == 33 and fits.choice.engine == "hearth"
    over = manual_hearth(info, card(8), 131072, "f16", "f16")
    assert not over.fits and over.over_budget[0][0] == "8 GiB card"


def test_a_manual_choice_without_gpu_counts_float32_weights_in_ram(synthetic_info):
    info = synthetic_info("llama3-8b", "Q4_K_M")
    plan = manual_hearth(info, PlanRequest(host_budget_bytes=64 * GIB), 2048, "f16", "f16")
    (host,) = plan.devices
    assert host.weights_bytes > 4 * 7e9  # ~7.5 billion weights on the GPU side, 4 bytes each
    assert plan.config.n_gpu_layers == 0


def test_the_plan_budgets_the_pages_of_n_sequences(synthetic_info):
    """`hearth serve --parallel 64`: each sequence's share in whole pages and a row per sequence
    in the decode step, so the longest context that fits is shorter than for two sequences
    (one sequence's plan counts the prefill graphs' pool too, which a batch does not keep)."""
    from dataclasses import replace

    info = synthetic_info("llama3-8b", "Q4_K_M")
    two = longest_context(info, replace(card(12), n_parallel=2), "q8", "q8")
    many = longest_context(info, replace(card(12), n_parallel=64), "q8", "q8")
    assert 0 < many < two


def test_several_sequences_are_never_planned_with_kivi4_keys(synthetic_info):
    """Best fit leaves kivi4 keys out for several sequences (the batch takes them when asked,
    but runs their prompt chunks eagerly and has no serving figure)."""
    from dataclasses import replace

    info = synthetic_info("llama3-8b", "Q4_K_M")
    assert plan_hearth(info, card(12.5)).choice.type_k == "kivi4"  # one sequence: the best pair
    plan = plan_hearth(info, replace(card(12.5), n_parallel=4))
    assert plan.fits and plan.choice.type_k != "kivi4"
