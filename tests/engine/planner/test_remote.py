"""Planning across helper machines (engine/planner/remote.py, remote_link.py): helper devices are
budgeted as local ones of their backend, placed first (llama.cpp's order), cost network time per
token, and Best fit uses them only when they make the model fit or run faster."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.hardware.remote import RemoteDevice, RemoteHost, RemoteLink
from engine.planner import Planner
from engine.planner.backends import DEFAULT_CPU_BANDWIDTH_GBPS
from engine.planner.remote import helper_budgets, plan_with_helpers, with_helpers
from engine.planner.remote_link import network_seconds_per_token, traffic_bytes_per_token
from tests.engine.planner.conftest import GIB, gpu, request

TEN_GBE = RemoteLink(latency_s=0.0002, bytes_per_s=10e9 / 8 * 0.9)
SLOW = RemoteLink(latency_s=0.05, bytes_per_s=1e6)


def helper(
    gib: float = 24.0,
    backend: str = "cuda",
    link: RemoteLink | None = TEN_GBE,
    address: str = "pc2:50052",
    limit: int | None = None,
    devices: int = 1,
):
    return RemoteHost(
        address=address,
        protocol_version=(7, 0, 0),
        devices=tuple(
            RemoteDevice(
                address, i, f"CUDA{i}", "card", backend, int(gib * GIB), int(gib * GIB), limit
            )
            for i in range(devices)
        ),
        link=link,
    )


def test_helper_devices_are_budgeted_like_local_ones_of_their_backend():
    (budget,) = helper_budgets(helper(24.0))
    assert budget.backend == "cuda"
    assert budget.budget_bytes == 24 * GIB - int(0.04 * 24 * GIB)  # the local safety margin
    assert budget.rpc_server == "pc2:50052"
    assert budget.link_latency_s == TEN_GBE.latency_s
    assert budget.name == "CUDA0 on pc2:50052"


def test_the_helpers_own_bandwidth_figure_is_used_and_a_cpu_gets_the_default():
    host = helper()
    measured = dataclasses.replace(host.devices[0], memory_bandwidth_gbps=936.0)
    (gpu_budget,) = helper_budgets(dataclasses.replace(host, devices=(measured,)))
    assert gpu_budget.bandwidth_gbps == 936.0
    (cpu_budget,) = helper_budgets(helper(backend="cpu"))
    assert cpu_budget.bandwidth_gbps == DEFAULT_CPU_BANDWIDTH_GBPS
    (unknown,) = helper_budgets(helper())
    assert unknown.bandwidth_gbps is None  # the speed model's mid-range card


def test_a_memory_limit_caps_the_budget_and_an_unknown_kind_is_planned_as_cuda():
    (budget,) = helper_budgets(helper(24.0, backend="unknown", limit=2 * GIB))
    assert budget.budget_bytes == 2 * GIB
    assert budget.backend == "cuda"


def test_helpers_come_before_local_gpus_as_in_llama_cpp():
    req = with_helpers(request(gpu(8)), [helper(address="a:1"), helper(address="b:2", devices=2)])
    assert [g.rpc_server for g in req.gpus] == ["a:1", "b:2", "b:2", None]


def test_network_time_counts_the_link_and_the_logits_of_the_output_layer(synthetic_profile):
    profile = synthetic_profile("llama3-8b", "Q4_K_M")  # 32 layers; 32 is the output layer
    (fast,) = helper_budgets(helper(link=TEN_GBE))
    (slow,) = helper_budgets(helper(link=SLOW))
    local = gpu(8)
    assert network_seconds_per_token(profile, 4096, [(0, 16), (16, 33)], [local, local]) == 0
    middle = network_seconds_per_token(profile, 4096, [(8, 16)], [fast])
    last = network_seconds_per_token(profile, 4096, [(16, 33)], [fast])
    assert 0 < middle < last  # the logits come back from the device holding the output layer
    assert traffic_bytes_per_token(profile, 4096, 16, True) > 4 * profile.n_vocab
    assert traffic_bytes_per_token(profile, 4096, 16, False) < 4 * profile.n_vocab
    deeper = traffic_bytes_per_token(profile, 32768, 16, False)
    assert deeper > traffic_bytes_per_token(profile, 4096, 16, False)  # the mask grows
    assert network_seconds_per_token(profile, 4096, [(16, 33)], [slow]) > 100 * last
    assert network_seconds_per_token(profile, 4096, [(5, 5)], [slow]) == 0.0  # no layers


@pytest.fixture
def planner(synthetic_info):
    return Planner([synthetic_info("llama3-8b", "Q4_K_M")])


def test_a_model_that_fits_here_leaves_the_helpers_unused(planner):
    plan = plan_with_helpers(planner, request(gpu(24), target_ctx=8192), [helper()])
    assert plan.fits
    assert plan.settings.rpc_servers == ()
    assert "not used" in plan.notes[-1]


def test_a_helper_is_used_where_the_model_does_not_fit_here(planner):
    tiny = request(host_budget_bytes=2 * GIB, target_ctx=8192)
    assert not planner.plan(tiny).fits
    plan = plan_with_helpers(planner, tiny, [helper()])
    assert plan.fits
    assert plan.settings.rpc_servers == ("pc2:50052",)
    assert plan.devices[0].name == "CUDA0 on pc2:50052"  # one memory-bar row per remote device
    assert plan.devices[0].weights_bytes > 0
    assert "does not fit here alone" in plan.notes[-1]


def test_a_fast_helper_beats_offloading_to_this_cpu_and_a_slow_one_does_not(planner):
    small_card = request(gpu(4), target_ctx=8192, preference="speed")
    local = planner.plan(small_card)
    assert local.fits and local.choice.n_gpu_layers < local.choice.n_layers + 1
    fast = plan_with_helpers(planner, small_card, [helper(link=TEN_GBE)])
    assert fast.settings.rpc_servers == ("pc2:50052",)
    assert fast.tokens_per_second > local.tokens_per_second
    assert fast.settings.tensor_split[0] > 0  # the helper's share comes first
    slow = plan_with_helpers(planner, small_card, [helper(link=SLOW)])
    assert slow.settings.rpc_servers == ()
    assert slow.tokens_per_second == pytest.approx(local.tokens_per_second)


def test_the_predicted_speed_counts_the_link(planner):
    only_helper = with_helpers(request(target_ctx=8192), [helper(link=TEN_GBE)])
    over_fast = planner.plan(only_helper)
    over_slow = planner.plan(with_helpers(request(target_ctx=8192), [helper(link=SLOW)]))
    assert over_fast.tokens_per_second > 2 * over_slow.tokens_per_second


def test_a_plan_without_helpers_is_unchanged(planner):
    req = request(gpu(6), target_ctx=8192)
    assert plan_with_helpers(planner, req, []) == planner.plan(req)


MEASURED = Path(__file__).parents[3] / "docs" / "measurements"


@pytest.mark.parametrize(
    ("file", "shape"),
    [
        ("starter", dict(n_embd=576, n_vocab=49152, n_layer=30)),
        ("gemma3-270m", dict(n_embd=640, n_vocab=262144, n_layer=18)),
    ],
)
def test_the_traffic_model_is_within_ten_percent_of_the_counted_traffic(file, shape):
    """benchmarks/rpc_traffic.py counted these; the helper held the output layer and the last
    n_gpu_layers - 1 layers, at `prompt_tokens` of depth (the model's n_ctx // 2)."""
    profile = SimpleNamespace(**shape)
    counted_file = MEASURED / f"2026-11-25-rpc-traffic-{file}-cpu.json"
    for row in json.loads(counted_file.read_text())["rows"]:
        counted = row["sent_per_token"] + row["received_per_token"]
        depth = row["prompt_tokens"] + 24  # the middle of the counted tokens
        model = traffic_bytes_per_token(profile, 2 * depth, row["n_gpu_layers"] - 1, True)
        assert model == pytest.approx(counted, rel=0.1), row["n_gpu_layers"]
