"""benchmarks/moe_offload.py off the GPU: its Hearth run (the child's part) on a tiny random MoE
model on the CPU with plain torch, the planner's side on the Qwen3-30B-A3B shape, and the
--n-cpu-moe settings it tries."""

from __future__ import annotations

import argparse

import pytest

pytest.importorskip("torch")

from benchmarks.moe_offload import _hearth_text, plan_for_card, run_hearth, settings_around
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

GIB = 1024**3


@pytest.fixture
def one_thread():
    """torch on one thread: tiny matrices on a shared 2-core machine spend seconds in its
    threads' barriers otherwise (18 s against 2)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_hearth_run_counts_its_misses_and_predicts(tmp_path, one_thread):
    path = write_tiny_gguf(tmp_path / "moe.gguf", tiny_spec("qwen3moe", n_layer=2))
    args = argparse.Namespace(model=str(path), ram_layers=1, slots=3, ctx=32, gpu_gbps=100.0,
                              device="cpu", cpu_picks=0, cpu_threads=1)  # fmt: skip
    got = run_hearth(args)
    assert got["ok"] and got["layers_cached"] == 1 and got["steps"] == 16
    assert got["misses_per_token"] > 0 and got["mib_copied_per_token"] > 0
    assert got["hits_per_token"] + got["misses_per_token"] <= 2  # top-2, one layer in RAM
    # even routing over 8 experts with 3 slots: 2 x 5/8 misses a token
    assert got["predicted_misses_per_token"] == pytest.approx(1.25)
    assert "3 cache slots each (eager): tg128" in _hearth_text(got)
    args.ram_layers, args.slots = 2, 0
    in_place = run_hearth(args)
    assert in_place["ok"] and in_place["misses_per_token"] == 0
    assert in_place["predicted_misses_per_token"] == 4  # all k = 2 of both layers
    assert "read in place" in _hearth_text(in_place)
    assert "failed: no" in _hearth_text({"ok": False, "error": "no"})
    args.cpu_picks = 1  # a split: one of a token's 2 picks by the CPU, the other copied over
    split = run_hearth(args)
    assert split["ok"] and split["cpu_picks"] == 1 and split["misses_per_token"] == 0
    assert split["split_steps_per_token"] == 2  # both layers in RAM pause once a decode step
    assert split["predicted_misses_per_token"] == 2  # the GPU's one pick of both layers
    assert "1 of 2 picks a token by the CPU" in _hearth_text(split)
    args.cpu_picks = 3
    with pytest.raises(ValueError, match="0 to 2 of a token's picks"):
        run_hearth(args)


def test_the_plan_for_a_12_gib_card(tmp_path):
    path = write_sparse_gguf(tmp_path / "q.gguf", SHAPES["qwen3-30b-a3b"], "Q4_K_M")
    plan = plan_for_card(str(path), int(11.5 * GIB), 1024, 4800.0)
    assert plan["hearth_fits"] and plan["llama_fits"]
    in_place, cached = plan["placements"]
    assert in_place["slots"] == 0 and 0 < in_place["ram_layers"] < 48
    assert cached["slots"] >= 8 and cached["ram_layers"] >= in_place["ram_layers"]
    # (layers, slots, CPU picks): at the H200 host's rates a split of 3 picks by the CPU beats
    # both the in-place read and every pick on the CPU, at the in-place count of layers
    assert tuple(plan["chosen"][:2]) == (in_place["ram_layers"], 0)
    assert plan["chosen"][2] == 3
    assert 0 < plan["llama_ncmoe"] < 48 and in_place["predicted"] > 0


@pytest.mark.parametrize(
    ("n", "expected"),
    [(19, [15, 17, 19, 21, 48]), (46, [42, 44, 46, 48]), (1, [0, 1, 3, 48])],
)
def test_settings_around(n, expected):
    assert settings_around(n, 48) == expected
