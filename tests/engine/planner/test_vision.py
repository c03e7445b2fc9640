"""A vision projector's cost to a plan: its memory where it sits, its images' context."""

from __future__ import annotations

import pytest

from engine.gguf.projector import ProjectorInfo
from engine.planner.records import DeviceBudget, DeviceUsage, PlanRequest
from engine.planner.vision import (
    ProjectorCost,
    projector_cost,
    projector_note,
    reserve_projector,
    with_projector,
)

MIB = 2**20
GPU0 = DeviceBudget("gpu0", "RTX A", "cuda", 8000 * MIB)
GPU1 = DeviceBudget("gpu1", "RTX B", "cuda", 8000 * MIB)


@pytest.mark.parametrize(
    "projector, weights, compute",
    [
        # Gemma 3's SigLIP: 896/14 = 64 patches a side, 4,096 patches
        (
            ProjectorInfo("gemma3", 800 * MIB, 896, 14, 4, 2560),
            800 * MIB,
            4 * 4096 * 4096 * 2 + 4 * 4096 * 4096 * 4,
        ),
        # a dynamic projector counts its largest image (max_pixels) instead
        (
            ProjectorInfo("qwen2.5vl_merger", 1300 * MIB, 560, 14, 2, 3584, max_pixels=196 * 3136),
            1300 * MIB,
            4 * 3136 * 3136 * 2 + 4 * 3136 * 4096 * 4,
        ),
    ],
)
def test_projector_cost(projector, weights, compute):
    cost = projector_cost(projector, on_gpu=True)
    assert (cost.weights_bytes, cost.compute_bytes) == (weights, compute)
    assert cost.total_bytes == weights + compute
    assert cost.image_tokens == projector.image_tokens


@pytest.mark.parametrize(
    "request_, on_gpu, gpus_after, host_after",
    [
        (
            PlanRequest(gpus=(GPU0, GPU1), host_budget_bytes=16000 * MIB),
            True,
            (7000 * MIB, 8000 * MIB),
            16000 * MIB,
        ),  # the first GPU only
        (
            PlanRequest(gpus=(GPU0,), host_budget_bytes=16000 * MIB),
            False,
            (8000 * MIB,),
            15000 * MIB,
        ),  # on the CPU: system RAM
        (PlanRequest(host_budget_bytes=16000 * MIB), True, (), 15000 * MIB),  # no GPU at all
        (PlanRequest(host_budget_bytes=None), False, (), None),  # RAM not checked
        (PlanRequest(gpus=(DeviceBudget("g", "small", "cuda", 500 * MIB),)), True, (0,), None),
    ],
)
def test_reserve_projector(request_, on_gpu, gpus_after, host_after):
    cost = ProjectorCost(900 * MIB, 100 * MIB, 256, on_gpu)
    after = reserve_projector(request_, cost)
    assert tuple(g.budget_bytes for g in after.gpus) == gpus_after
    assert after.host_budget_bytes == host_after


def _usage(id_: str, budget: int | None) -> DeviceUsage:
    return DeviceUsage(id_, id_, budget, 1000, 100, 10, 1)


@pytest.mark.parametrize(
    "on_gpu, where",
    [(True, "gpu0"), (False, "host")],
)
def test_with_projector_counts_it_where_it_sits_and_gives_its_budget_back(on_gpu, where):
    devices = (_usage("gpu0", 5000), _usage("gpu1", 5000), _usage("host", None))
    cost = ProjectorCost(300, 200, 64, on_gpu)
    after = {d.id: d for d in with_projector(devices, cost)}
    assert after[where].projector_bytes == 500
    assert after[where].total_bytes == 1111 + 500
    assert sum(d.projector_bytes for d in after.values()) == 500
    if where == "gpu0":
        # planned on 4,500 (the projector set aside), shown against the device's 5,000
        assert after["gpu0"].budget_bytes == 5500
    assert after["gpu1"] == devices[1]


def test_projector_note():
    note = projector_note(ProjectorCost(800 * MIB, 224 * MIB, 256, True), 8192, "RTX A")
    assert note == (
        "The vision projector takes 1.00 GiB on RTX A; an image takes up to 256 tokens of the "
        "8,192-token context (room for about 32 with no text)."
    )
