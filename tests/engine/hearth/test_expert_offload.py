"""Experts in RAM (engine/hearth/expert_offload.py): the slots' bookkeeping by table, and a tiny
random MoE model whose last layer keeps its experts in host memory with a small device cache
giving the same logits as the model with every expert on the device (CPU tensors stand in for
host and device)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth.expert_offload import (
    ExpertPlacement,
    ExpertSlots,
    ExpertsOnCpu,
    RamExperts,
    batches,
    offload_stats,
)
from engine.hearth.ops import TorchOps
from engine.hearth.staged_experts import StagedExperts
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import placement_logits, tiny_spec, write_tiny_gguf


@pytest.mark.parametrize(
    ("steps", "expected_loads", "hits", "misses"),
    [
        # slots start with experts 0, 1, 2: hits load nothing
        ([[0, 2]], [[]], 2, 0),
        # a miss takes the least recently used slot (slot 0, expert 0)
        ([[5]], [[(5, 0)]], 0, 1),
        # touched experts become recent: after using 0 and 1, expert 2's slot goes first
        ([[0, 1], [7]], [[], [(7, 2)]], 2, 1),
        # a step never evicts an expert it needs itself (1 is the oldest but needed)
        ([[2, 0], [1, 6, 7]], [[], [(6, 2), (7, 0)]], 3, 2),
        # the same expert twice in a row: loaded once
        ([[4], [4]], [[(4, 0)], []], 1, 1),
    ],
)
def test_slots_load_misses_into_the_least_recently_used(steps, expected_loads, hits, misses):
    slots = ExpertSlots(3, 8)
    got = []
    for needed in steps:
        where, loads = slots.assign(needed)
        got.append(loads)
        assert sorted(where) == sorted(needed)
        assert all(slots.expert_in[s] == e for e, s in where.items())
    assert got == expected_loads
    assert (slots.hits, slots.misses) == (hits, misses)
    assert len(set(slots.expert_in)) == 3  # no expert in two slots


def test_slots_refuse_more_experts_than_slots():
    with pytest.raises(ValueError, match="3 experts for 2 slots"):
        ExpertSlots(2, 8).assign([1, 2, 3])


@pytest.mark.parametrize(
    ("needed", "size", "expected"),
    [([1, 2, 3, 4, 5], 2, [[1, 2], [3, 4], [5]]), ([1, 2], 4, [[1, 2]]), ([], 3, [])],
)
def test_batches(needed, size, expected):
    assert batches(needed, size) == expected


@pytest.mark.parametrize(
    ("placement", "problem"),
    [
        (ExpertPlacement(1, 1), "needs 0 .* or between 2 .* and 8 slots"),
        (ExpertPlacement(1, 9), "between 2"),
        (ExpertPlacement(0, 0), None),
        (ExpertPlacement(3, 0), None),  # read in place
        (ExpertPlacement(2, 2), None),
    ],
)
def test_placement_needs_one_tokens_experts_per_cache(placement, problem):
    if problem is None:
        placement.check(8, 2)
    else:
        with pytest.raises(ValueError, match=problem):
            placement.check(8, 2)


TOKENS = [1, 5, 9, 2, 77, 31, 8, 100, 3, 64, 12, 4]


@pytest.fixture(autouse=True)
def one_thread():
    """torch on one thread: these tiny matrices spent seconds in its threads' barriers on the
    shared 2-core machine (11 s against 0.3 for the logits test)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _logits(path, placement: ExpertPlacement):
    """A 9-token prefill (more distinct experts than slots: batches), then decode steps."""
    return placement_logits(path, placement, TOKENS, prefill=9)


@pytest.fixture(scope="module")
def qwen3moe(tmp_path_factory):
    path = tmp_path_factory.mktemp("offload") / "qwen3moe.gguf"
    return write_tiny_gguf(path, tiny_spec("qwen3moe", n_layer=2))


def test_experts_in_ram_give_the_logits_of_experts_on_the_device(qwen3moe):
    """Layer 1 in RAM with 3 slots for 8 experts (top-2): the prefill goes in batches of
    slots, decode steps miss and evict, and the logits stay those of the all-on-device model
    (float32 sums in another order: within 1e-5)."""
    expected, _ = _logits(qwen3moe, ExpertPlacement())
    got, model = _logits(qwen3moe, ExpertPlacement(ram_layers=1, cache_slots=3))
    assert isinstance(model.layers[1].moe.experts, RamExperts)
    assert not isinstance(model.layers[0].moe.experts, RamExperts)
    assert model.routes_on_host
    stats = offload_stats(model.layers)
    assert stats["layers_cached"] == 1 and stats["misses"] > 0
    assert stats["bytes_copied"] == stats["misses"] * model.layers[1].moe.experts.expert_nbytes
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_cache_as_big_as_the_experts_copies_nothing(qwen3moe):
    """Every expert in a slot from the start: no copy, the same logits."""
    expected, _ = _logits(qwen3moe, ExpertPlacement())
    got, model = _logits(qwen3moe, ExpertPlacement(ram_layers=2, cache_slots=8))
    assert offload_stats(model.layers)["misses"] == 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_experts_read_in_place_need_no_host_routing(qwen3moe):
    """0 slots: both layers' experts stay in (here: CPU) host memory and are read where they
    are; no copy, no routing read back, so the decode step can still be one CUDA graph."""
    expected, _ = _logits(qwen3moe, ExpertPlacement())
    got, model = _logits(qwen3moe, ExpertPlacement(ram_layers=2, cache_slots=0))
    assert not model.routes_on_host
    assert offload_stats(model.layers)["layers_cached"] == 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_the_host_copy_is_never_the_files_mapping(qwen3moe):
    """Copying into a slot writes the cache only: the host experts (and the file) stay."""
    info = read_model_info(qwen3moe)
    tensors = GGUFTensors(str(qwen3moe), info)
    parts = [tensors.experts(f"blk.0.ffn_{k}_exps.weight") for k in ("gate", "up", "down")]
    before = parts[0].data.clone()
    ram = TorchOps("cpu").prepare_experts_in_ram(*parts, "silu", n_slots=2)
    ram.slots.assign([5, 6])
    ram._copy([(5, 0), (6, 1)])
    assert torch.equal(ram.cache.gate.data[0], ram.host.gate.data[5])
    assert torch.equal(ram.host.gate.data, before) and torch.equal(parts[0].data, before)


def test_the_driver_loads_the_placement_its_params_name(on_cpu, qwen3moe):
    """ModelParams' hearth_ram_expert_layers / hearth_expert_cache_slots reach the engine's
    load (the worker's path: runtime/hearth_driver.py), and a cache too small for one token's
    experts is refused with what to do."""
    from engine.llama.driver import EngineError
    from engine.runtime.hearth_load import load_transformer
    from engine.runtime.protocol import ModelParams

    def load(layers: int, slots: int, cpu_picks: int = 0):
        params = ModelParams(path=str(qwen3moe), engine="hearth", n_threads=1,
                             hearth_ram_expert_layers=layers, hearth_expert_cache_slots=slots,
                             hearth_expert_cpu_picks=cpu_picks)  # fmt: skip
        loaded = load_transformer(params)
        loaded.tensors.close()
        return loaded.transformer

    cached = load(1, 3)
    assert isinstance(cached.layers[1].moe.experts, RamExperts) and cached.routes_on_host
    assert not isinstance(cached.layers[0].moe.experts, RamExperts)
    in_place = load(2, 0)
    assert not in_place.routes_on_host
    with pytest.raises(EngineError, match=r"needs 0 .* or between 2 .*Best fit"):
        load(1, 1)
    # the CPU computing all of a token's 2 picks, or one of them (the other copied over)
    all_cpu = load(1, 0, cpu_picks=2).layers[1].moe.experts
    assert isinstance(all_cpu, ExpertsOnCpu)
    split = load(1, 0, cpu_picks=1)
    assert isinstance(split.layers[1].moe.experts, StagedExperts) and not split.routes_on_host
    with pytest.raises(EngineError, match=r"3 of 2 picks on the CPU.*Best fit"):
        load(1, 0, cpu_picks=3)
    with pytest.raises(EngineError, match="take no device cache"):
        load(1, 3, cpu_picks=2)
    with pytest.raises(EngineError, match="with no cache"):
        load(1, 3, cpu_picks=1)
