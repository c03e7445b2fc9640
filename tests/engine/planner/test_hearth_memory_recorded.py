"""The Hearth memory model against two H200 runs of benchmarks/hearth_memory.py cards.

The first (2026-11-28, docs/measurements/2026-11-28-s12-call-d/hearth-memory.json): for each
load, torch's peak allocation over the process (load, cache, fill, a 512-token prefill chunk at
the end of the context, 8 decode steps) against the model's allocation terms, weights + KV
cache + decode and prefill workspace (allocated bytes: no allocator rounding, no CUDA context;
this run did not sample NVML's peak). The second sampled it: RECORDED_PEAKS.

Both ran while every layer's prefill attention made its own mask: the slot ids (int64), the
boolean [T, n], its repeat for the G query heads of a KV head and SDPA's f16 copy of that, all
freed at the layer's end. The engine now makes the f16 mask once a chunk and keeps it through
the layers (kernels/grouped_attention.py), and the model counts that; `as_measured` puts the
per-layer buffers back in its place, so these rows check every other term of the model
(weights, cache, activations, the GEMM, the gathered K and V) against what was measured.
NVML's peaks of the second run held torch's reserved blocks beside those per-layer buffers
too (a second segment of the f16 copy in two loads), which the engine no longer makes: the
model's total is not judged against them; the next cards run measures it.

Gemma 3's rows of the first run were measured while PagedKVCache._seen still made the
query-key distances as int64 (8 bytes a query and key, above the attention's own peak for its
2 query heads per KV head); the engine no longer does, so the model counts up to 3 bytes a
query and key less than those rows used (-0.9% at 132k positions)."""

from __future__ import annotations

import pytest

from engine.planner.hearth_memory import (
    HEARTH_COSTS,
    MIB,
    HearthConfig,
    _chunk_rows,
    _prefill_attention,
    _prefill_attention_buffers,
    _prefill_gemm,
    hearth_items,
    prefill_masks,
)
from engine.planner.hearth_weights import HearthProfile


def as_measured(profile: HearthProfile, config: HearthConfig) -> int:
    """The model's live allocations at the peak (weights, cache, decode and prefill
    workspace) for the engine these rows measured: the chunk's mask taken out, each layer's
    own mask buffers (slot ids, boolean, its repeat, SDPA's f16 copy) beside its gathered K
    and V put in."""
    cfg, costs = profile.config, HEARTH_COSTS
    items = hearth_items(profile, config)
    rows, n = _chunk_rows(config), config.n_ctx
    gemm = _prefill_gemm(profile, rows, costs)
    layer_then = sum(_prefill_attention_buffers(cfg, config, rows, costs))
    layer_then += 8 * n + rows * n * (1 + cfg.n_rep + 2 * cfg.n_rep)
    workspace_then = (
        items.prefill_workspace
        - prefill_masks(cfg, config, rows)
        - max(gemm, _prefill_attention(cfg, config, rows, costs))
        + max(gemm, layer_then)
    )
    return items.weights + items.kv + items.decode_workspace + workspace_then


# card GiB, shape, K, V, context planned, torch's peak allocation, NVML's used memory at the end
RECORDED = [
    (12, "llama3-8b", "f16", "f16", 38912, 10537725952, 11236081664),
    (12, "llama3-8b", "q8", "q8", 71168, 10553837568, 10931994624),
    (12, "llama3-8b", "q8", "rot4", 83968, 10475355136, 10720182272),
    (12, "llama3-8b", "rot4", "rot4", 103936, 10395447296, 10569187328),
    (12, "llama3-8b", "rot2", "rot4", 122880, 10423092224, 10263003136),
    (12, "mistral-7b", "f16", "f16", 45056, 10860941824, 11280121856),
    (12, "mistral-7b", "q8", "q8", 81920, 10817739264, 10751639552),
    (12, "mistral-7b", "q8", "rot4", 98304, 10814184960, 10630004736),
    (12, "mistral-7b", "rot4", "rot4", 120832, 10787709952, 10495787008),
    (12, "mistral-7b", "rot2", "rot4", 145664, 10870733312, 10246225920),
    (12, "gemma3-12b", "f16", "f16", 5632, 9883365888, 10514661376),
    (12, "gemma3-12b", "q8", "q8", 11264, 9900667904, 10533535744),
    (12, "gemma3-12b", "q8", "rot4", 14336, 9972120576, 10682433536),
    (12, "gemma3-12b", "rot4", "rot4", 17920, 9903060480, 10541924352),
    (12, "gemma3-12b", "rot2", "rot4", 20736, 9731696128, 10462232576),
    (24, "llama3-8b", "f16", "f16", 125952, 22882919936, 22556508160),
    (24, "llama3-8b", "q8", "q8", 231424, 22918848512, 21235302400),
    (24, "llama3-8b", "q8", "rot4", 262144, 21935810048, 20199309312),
    (24, "llama3-8b", "rot4", "rot4", 262144, 18576745984, 16910974976),
    (24, "llama3-8b", "rot2", "rot4", 262144, 16429262336, 14763491328),
    (24, "mistral-7b", "f16", "f16", 132096, 23207389184, 22705405952),
    (24, "mistral-7b", "q8", "q8", 241664, 23165784576, 21409366016),
    (24, "mistral-7b", "q8", "rot4", 262144, 21390153216, 19433848832),
    (24, "mistral-7b", "rot4", "rot4", 262144, 18028287488, 16145514496),
    (24, "mistral-7b", "rot2", "rot4", 262144, 15880803840, 13998030848),
    (24, "gemma3-12b", "f16", "f16", 36352, 22194741760, 22669754368),
    (24, "gemma3-12b", "q8", "q8", 70656, 22387755520, 22288072704),
    (24, "gemma3-12b", "q8", "rot4", 84992, 22259705344, 21990277120),
    (24, "gemma3-12b", "rot4", "rot4", 108544, 22200449536, 21799436288),
    (24, "gemma3-12b", "rot2", "rot4", 132608, 22242753024, 21566652416),
]


@pytest.fixture(scope="module")
def profiles(synthetic_info):
    shapes = {row[1] for row in RECORDED}
    return {shape: HearthProfile.of(synthetic_info(shape, "Q4_K_M")) for shape in shapes}


@pytest.mark.parametrize(("card", "shape", "type_k", "type_v", "n_ctx", "peak", "end"), RECORDED)
def test_the_allocations_match_torchs_peak(profiles, card, shape, type_k, type_v, n_ctx, peak, end):
    allocated = as_measured(profiles[shape], HearthConfig(n_ctx, type_k, type_v, 512))
    assert abs(allocated - peak) <= max(128 * MIB, 0.03 * peak), (
        f"{shape} {type_k}/{type_v} at {n_ctx}: predicted {allocated / MIB:,.0f} MiB, torch's "
        f"peak {peak / MIB:,.0f} MiB"
    )


# The second (docs/measurements/2026-11-28-s14-call-3/memory/hearth-memory.json), NVML's used
# memory sampled every 1 ms through each load; its torch peak allocations, against the model's
# live terms as that engine made them (as_measured).
# card GiB, shape, K, V, context planned, NVML's peak, torch's peak allocation
RECORDED_PEAKS = [
    (12, "llama3-8b", "f16", "f16", 45056, 12542607360, 11410597376),
    (12, "llama3-8b", "q8", "rot4", 98304, 12282560512, 11361370624),
    (12, "llama3-8b", "rot2", "rot4", 147456, 12391612416, 11438427648),
    (12, "mistral-7b", "f16", "f16", 49152, 12571967488, 11442423296),
    (12, "mistral-7b", "q8", "rot4", 106496, 12731351040, 11378992128),
    (12, "mistral-7b", "rot2", "rot4", 159744, 12448235520, 11490619904),
    (12, "gemma3-12b", "f16", "f16", 8704, 12114788352, 11093313536),
    (12, "gemma3-12b", "q8", "rot4", 21504, 12406292480, 11181555712),
    (12, "gemma3-12b", "rot2", "rot4", 32768, 12324503552, 11033295360),
    (24, "llama3-8b", "f16", "f16", 132096, 24706088960, 23756176384),
    (24, "llama3-8b", "q8", "rot4", 262144, 23909171200, 21937187328),
    (24, "llama3-8b", "rot2", "rot4", 262144, 17399611392, 16430983680),
    (24, "mistral-7b", "f16", "f16", 136192, 25259737088, 23788837888),
    (24, "mistral-7b", "q8", "rot4", 262144, 22298558464, 21391673856),
    (24, "mistral-7b", "rot2", "rot4", 262144, 16841768960, 15881980416),
    (24, "gemma3-12b", "f16", "f16", 39936, 24748032000, 23600382976),
    (24, "gemma3-12b", "q8", "rot4", 93184, 24490082304, 23547863552),
    (24, "gemma3-12b", "rot2", "rot4", 145408, 24571871232, 23524107776),
]


@pytest.mark.parametrize(
    ("card", "shape", "type_k", "type_v", "n_ctx", "nvml", "allocated"), RECORDED_PEAKS
)
def test_the_live_allocations_match_torchs_peak_of_the_sampled_run(
    profiles, card, shape, type_k, type_v, n_ctx, nvml, allocated
):
    live = as_measured(profiles[shape], HearthConfig(n_ctx, type_k, type_v, 512))
    assert abs(live - allocated) <= max(128 * MIB, 0.03 * allocated), (
        f"{shape} {type_k}/{type_v} at {n_ctx}: predicted {live / MIB:,.0f} MiB, torch's "
        f"peak allocation {allocated / MIB:,.0f} MiB (NVML's peak {nvml / MIB:,.0f} MiB)"
    )
