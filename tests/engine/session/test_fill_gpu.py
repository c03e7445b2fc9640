""" "Use all of my GPU", by table: the card filled with context up to the safety margin, never past
it; the training context caps it; a model that does not fit whole gets the usual best fit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.planner import Planner, safety_margin
from engine.planner.fill_gpu import fill_request, fill_target, margin_text
from engine.planner.kv_cache import CTX_PAD
from engine.planner.manual import plan_manual
from engine.session import plan_load
from tests.engine.session.conftest import GIB, cpu, machine, nvidia

MIB = 1024**2


def _gpu_usage(decision):
    return next(d for d in decision.plan.devices if d.id != "host")


@pytest.mark.parametrize(
    ("shape", "free_gib", "card_gib", "capped_by_training"),
    [
        ("mistral-7b", 11.5, 12, True),  # 32k training context fits with room to spare
        ("gemma3-12b", 11.5, 12, True),  # 128k reaches with a leaner KV type
        ("gemma3-12b", 9.5, 10, False),  # the card runs out first
        ("llama3-8b", 23.0, 24, True),  # 8k training context: most of the card stays free
    ],
)
def test_the_card_fills_with_context_up_to_the_margin_never_past_it(
    model_file, shape, free_gib, card_gib, capped_by_training
):
    path = model_file(shape, "Q4_K_M")
    pc = machine(nvidia(free_gib, card_gib), cpu(32))
    decision = plan_load(path, pc, fill_gpu=True)
    usual = plan_load(path, pc)
    assert decision.fits and decision.plan.fits
    layers = decision.plan.n_layers + 1
    assert decision.params.n_gpu_layers in (-1, layers)  # every layer on the GPU
    gpu = _gpu_usage(decision)
    budget = int(free_gib * GIB) - safety_margin(int(card_gib * GIB))
    assert gpu.budget_bytes == budget and gpu.total_bytes <= budget  # never past the margin
    assert decision.params.n_ctx >= usual.params.n_ctx
    train = decision.info.context_length
    if capped_by_training:
        assert decision.params.n_ctx == train
        return
    assert decision.params.n_ctx < train
    # one context step more, with the same choice and every layer on the GPU, would cross the
    # margin: the card is full
    more = replace(decision.plan.choice, n_ctx=decision.params.n_ctx + CTX_PAD, n_gpu_layers=layers)
    request = fill_request(pc.plan_request(), train)
    assert not plan_manual(Planner(decision.info), request, more).fits


@pytest.mark.parametrize(
    ("shape", "free_gib", "card_gib"),
    [
        ("qwen3-30b-a3b", 11.5, 12),  # 17 GiB of weights on a 12 GiB card
        ("llama3-8b", 5.6, 6),  # whole on the GPU only with 5,888 tokens; the usual has 8,192
    ],
)
def test_where_filling_gives_less_context_the_usual_best_fit_loads(
    model_file, shape, free_gib, card_gib
):
    path = model_file(shape, "Q4_K_M")
    pc = machine(nvidia(free_gib, card_gib), cpu(48))
    filled, usual = plan_load(path, pc, fill_gpu=True), plan_load(path, pc)
    assert filled.fits and filled.params == usual.params


def test_a_remembered_choice_still_wins(model_file):
    from engine.session import PlanSource, RememberedChoice

    path = model_file("mistral-7b", "Q4_K_M")
    decision = plan_load(
        path, machine(nvidia(11.5, 12), cpu(32)), RememberedChoice(n_ctx=4096), fill_gpu=True
    )
    assert decision.source == PlanSource.CHOSEN and decision.params.n_ctx == 4096


@pytest.mark.parametrize(
    ("n_ctx_train", "parallel", "target"), [(32768, 1, 32768), (8192, 4, 32768), (None, 1, 32768)]
)
def test_fill_target(n_ctx_train, parallel, target):
    assert fill_target(n_ctx_train, parallel) == target


@pytest.mark.parametrize(
    ("total", "text"),
    [
        (None, "4% of the card, at least 384 MiB"),
        (24 * GIB, "4% of the card, at least 384 MiB: 983 MiB of this card"),
        (8 * GIB, "4% of the card, at least 384 MiB: 384 MiB of this card"),
    ],
)
def test_the_margin_is_stated(total, text):
    assert margin_text(total) == text
