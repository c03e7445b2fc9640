"""Settings chosen by hand: memory per device, over-budget reports, GPU layers "auto"."""

from __future__ import annotations

import pytest

from engine.gguf import read_model_info
from engine.planner import DeviceBudget, Planner, PlanRequest
from engine.planner.manual import ManualChoice, plan_manual
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    path = write_sparse_gguf(
        tmp_path_factory.mktemp("m") / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M"
    )
    return Planner(read_model_info(path))


def _request(gib: float) -> PlanRequest:
    gpu = DeviceBudget("cuda:0", "RTX", "cuda", int(gib * GIB))
    return PlanRequest(gpus=(gpu,), host_budget_bytes=64 * GIB)


def test_everything_on_a_big_gpu(llama8b):
    result = plan_manual(llama8b, _request(24), ManualChoice(n_ctx=8192))
    assert result.fits and result.config.n_gpu_layers == 33
    gpu, host = result.devices
    assert host.name == "system RAM"
    assert 4 * GIB < gpu.weights_bytes < 5 * GIB
    assert gpu.kv_bytes == 8192 * 32 * 2 * 1024 * 2  # tokens x layers x (K+V) x width x f16


def test_auto_layers_offload_what_fits_and_manual_may_go_over(llama8b):
    auto = plan_manual(llama8b, _request(3), ManualChoice(n_ctx=8192))
    assert auto.fits and 0 < auto.config.n_gpu_layers < 33
    assert auto.devices[0].total_bytes <= 3 * GIB
    manual = plan_manual(llama8b, _request(3), ManualChoice(n_ctx=8192, n_gpu_layers=33))
    assert not manual.fits and manual.over_budget[0][0] == "RTX"


@pytest.mark.parametrize(("kv_type", "ratio"), [("q8_0", 34 / 64), ("q4_0", 18 / 64)])
def test_a_smaller_kv_type_shrinks_the_cache(llama8b, kv_type, ratio):
    f16 = plan_manual(llama8b, _request(24), ManualChoice(n_ctx=8192)).devices[0].kv_bytes
    small = plan_manual(llama8b, _request(24), ManualChoice(n_ctx=8192, kv_type=kv_type))
    assert small.devices[0].kv_bytes == pytest.approx(f16 * ratio, rel=0.01)
    assert small.settings.type_k == small.settings.type_v == kv_type
