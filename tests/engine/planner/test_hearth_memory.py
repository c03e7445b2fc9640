"""The Hearth engine's memory model, item by item, against hand-computed tables."""

from __future__ import annotations

import dataclasses

import pytest

from engine.gguf import TensorInfo
from engine.planner.hearth_memory import (
    GIB,
    MIB,
    HearthConfig,
    hearth_estimate,
    hearth_items,
    kv_allocations,
    kv_bytes_per_token,
    torch_reserved,
)
from engine.planner.hearth_weights import HearthProfile, _matrix_allocations

# Llama-3-8B: 32 layers, 8 KV heads of 128 values
LAYERS, HEADS, D = 32, 8, 128


@pytest.fixture(scope="module")
def llama(synthetic_info):
    return HearthProfile.of(synthetic_info("llama3-8b", "Q4_K_M"))


def _rows(n_ctx: int) -> int:
    """positions x heads in whole pages of 64"""
    return -(-n_ctx // 64) * 64 * HEADS


@pytest.mark.parametrize(
    ("n_ctx", "type_k", "type_v", "per_row"),
    [
        (4096, "q8", "q8", (D + 2) * 2),  # int8 values + one f16 scale per row
        (4096, "rot4", "rot4", (D // 2 + 4 * D // 32) * 2),  # nibbles + f16 scale and min / 32
        (4096, "q8", "rot4", (D + 2) + (D // 2 + 4 * D // 32)),
        (4096, "rot2", "rot4", (D // 4 + 4 * D // 32) + (D // 2 + 4 * D // 32)),
        (4097, "q8", "q8", (D + 2) * 2),  # one more page of 64
        (100, "rot4", "q8", (D // 2 + 4 * D // 32) + (D + 2)),
        (4096, "f16", "q8", 2 * D + D + 2),  # f16 beside a paged format: paged f16 pages
        (1000, "f16", "f16", 2 * D * 2),  # f16 alone too: the driver's paged cache on a GPU
    ],
)
def test_paged_kv_bytes_per_format(llama, n_ctx, type_k, type_v, per_row):
    sizes = kv_allocations(llama.config, HearthConfig(n_ctx, type_k, type_v))
    extras = 4 * D + 8 * -(-n_ctx // 64)  # the rotation's signs (no matrix), block table
    assert sum(sizes) == _rows(n_ctx) * per_row * LAYERS + extras


def test_kivi4_keys_add_each_layers_open_page(llama):
    # codes D/2, scale and min per 32 positions and channel (f16): 5 bits a value like rot4
    sizes = kv_allocations(llama.config, HearthConfig(4096, "kivi4", "rot4"))
    extras = 4 * D + 8 * (4096 // 64)
    open_page = 2 * HEADS * 64 * D * 2  # K and V rows of the newest page, f16
    per_row = (D // 2 + 4 * D // 32) * 2
    assert sum(sizes) == _rows(4096) * per_row * LAYERS + open_page * LAYERS + extras
    # a batch of 4: an open page per sequence and one for the CUDA graphs' scratch sequence
    batch = HearthConfig(4096, "kivi4", "rot4", n_parallel=4)
    assert kv_allocations(llama.config, batch).count(5 * open_page) == LAYERS


@pytest.mark.parametrize(("type_k", "type_v", "element"), [("f32", "f32", 4), ("f16", "f32", 4)])
def test_plain_kv_is_one_tensor_per_role_at_the_exact_context(llama, type_k, type_v, element):
    # f32 is the plain torch cache's only, on a GPU too (engine/hearth/cache_layout.py)
    sizes = kv_allocations(llama.config, HearthConfig(1000, type_k, type_v))
    assert sizes == [LAYERS * HEADS * 1000 * D * element] * 2


@pytest.mark.parametrize(
    ("fmt", "bits"), [("f16", 16.0), ("q8", 8.125), ("rot4", 5.0), ("rot2", 3.0)]
)
def test_bits_per_value_match_the_quality_table(llama, fmt, bits):
    # docs/hearth-engine.md lists 16, 8.1, 5 and 3 bits per value
    v = "rot4" if fmt == "rot2" else fmt
    per_token = kv_bytes_per_token(llama.config, fmt, v)
    other = kv_bytes_per_token(llama.config, v, v) / 2
    assert (per_token - other) * 8 / (LAYERS * HEADS * D) == bits


def test_weights_on_the_gpu_are_the_whole_file_embedding_included(llama, synthetic_info):
    # the embedding table is on the GPU too: the decode graph and the prefill read its rows there
    info = synthetic_info("llama3-8b", "Q4_K_M")
    items = hearth_items(llama, HearthConfig(4096))
    embedding = info.tensor("token_embd.weight").n_bytes
    assert items.host_weights == embedding + 4096 * 4096 * 4  # + 4,096 rows kept in float32
    assert items.weights == info.weight_bytes  # every plane a multiple of 512
    assert items.weights <= items.weights_reserved < items.weights + 64 * MIB


def test_a_tied_output_packs_the_embedding_on_the_gpu(synthetic_info):
    info = synthetic_info("gemma3-12b", "Q4_K_M")
    assert info.tensor("output.weight") is None
    profile = HearthProfile.of(info)
    items = hearth_items(profile, HearthConfig(4096))
    assert items.host_weights == info.tensor("token_embd.weight").n_bytes + 4096 * 3840 * 4
    assert items.weights >= info.weight_bytes  # the embedding counts once more, as the output


def test_types_kernels_do_not_pack_are_kept_dequantized():
    q3k = TensorInfo("blk.0.ffn_up.weight", 11, "Q3_K", (4096, 1024), 4096 * 1024,
                     4096 * 1024 * 110 // 256, 0, 0)  # fmt: skip
    q4k = TensorInfo("blk.0.ffn_up.weight", 12, "Q4_K", (4096, 1024), 4096 * 1024,
                     4096 * 1024 * 144 // 256, 0, 0)  # fmt: skip
    assert _matrix_allocations(q3k) == [q3k.n_bytes, 4 * q3k.n_elements]
    # Q4_K planes: d, dmin (2 bytes), scales (12), qs (128) per block of 256
    blocks = 1024 * 4096 // 256
    assert _matrix_allocations(q4k) == [2 * blocks, 2 * blocks, 12 * blocks, 128 * blocks]


def test_q3_k_m_costs_four_bytes_a_weight_where_kernels_has_no_gemv(synthetic_info):
    info = synthetic_info("llama3-8b", "Q3_K_M")
    items = hearth_items(HearthProfile.of(info), HearthConfig(4096))
    assert items.weights > 3 * info.weight_bytes


@pytest.mark.parametrize(
    ("sizes", "reserved"),
    [
        ([100], 2 * MIB),  # small: their segment mapped 2 MiB at a time
        ([100] * 3, 2 * MIB),
        ([MIB + 1], 20 * MIB),  # the others: theirs mapped 20 MiB at a time
        ([3 * MIB] * 7, 40 * MIB),
        ([11 * MIB] * 3, 40 * MIB),  # side by side, not a segment each
        ([11 * MIB, 100, 3 * MIB, 1000 * MIB + 1], 1022 * MIB),
    ],
)
def test_torch_reserved(sizes, reserved):
    assert torch_reserved(sizes) == reserved


def test_paged_decode_does_not_grow_with_the_context_but_plain_decode_does(llama):
    def decode(n_ctx: int, kv: str) -> int:
        return hearth_items(llama, HearthConfig(n_ctx, kv, kv)).decode_workspace

    assert decode(4096, "q8") == decode(65536, "q8")
    assert decode(4096, "f16") == decode(65536, "f16")  # f16 is paged on a GPU too
    # the plain (f32) cache's one-query attention: 10 bytes per query head and slot, 8 per id
    assert decode(65536, "f32") - decode(4096, "f32") == (65536 - 4096) * (32 * 10 + 8)


@pytest.mark.parametrize("kv", ["f32", "f16", "rot4"])
@pytest.mark.parametrize("materialized", [False, True])
def test_prefill_attends_over_the_whole_context(llama, kv, materialized):
    import dataclasses

    from engine.planner.hearth_memory import HEARTH_COSTS

    costs = dataclasses.replace(HEARTH_COSTS, prefill_scores_materialized=materialized)

    def prefill(n_ctx: int) -> int:
        return hearth_items(llama, HearthConfig(n_ctx, kv, kv), costs).prefill_workspace

    # from 64k positions on the attention is a layer's peak, not the GEMM; per key: the
    # chunk's mask (512 rows repeated for the 4 query heads of a KV head,
    # additive f16, made once and kept through the layers) and a layer's K and V in f16 (f16
    # copies of the float32 plain cache, f16 pages gathered from the paged one); the math path
    # adds its float32 scores and softmax of 32 heads x 512 rows and K and V repeated per head
    mask = 2 * 4 * 512
    if materialized:
        per_key = mask + 2 * 32 * 512 * 4 + 2 * (8 + 32) * 128 * 2
    else:
        per_key = mask + 2 * 8 * 128 * 2
    assert prefill(131072) - prefill(65536) == 65536 * per_key


def test_a_short_context_peaks_at_the_gemm_not_the_attention(llama):
    """Below a few thousand positions a layer's peak is the joined gate+up matrix in f16
    (kernels/dequant.py's one pass: 2 bytes a weight, nothing beside) with its product, not
    the attention: the workspace grows with the context only by the chunk's mask there (kept
    through the GEMMs as well)."""
    short = [hearth_items(llama, HearthConfig(n, "rot4", "rot4")).prefill_workspace
             for n in (1024, 2048)]  # fmt: skip
    mask = 2 * 4 * 512  # bytes a key: 512 rows x 4 query heads a KV head, f16
    assert short[1] - short[0] == mask * 1024
    gemm = 2 * (2 * 14336 * 4096) + 512 * 2 * 14336 * 2
    long = hearth_items(llama, HearthConfig(65536, "rot4", "rot4")).prefill_workspace
    assert long - short[0] == mask * (65536 - 1024) + 2 * 8 * 128 * 2 * 65536 - gemm


def test_joined_matrices_and_the_prefill_gemm(llama, synthetic_info):
    from engine.planner.hearth_weights import matrix_groups

    groups = matrix_groups(synthetic_info("llama3-8b", "Q4_K_M"))
    first = [[t.name for t in g] for g in groups if g[0].name.startswith("blk.0.")]
    # Q4_K_M: Q and K (Q4_K) joined, V alone where it is Q6_K; gate and up joined
    assert ["blk.0.attn_q.weight", "blk.0.attn_k.weight"] in first
    assert ["blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"] in first
    assert llama.largest_matrix == 2 * 14336 * 4096  # gate + up, not the output matrix
    # the largest raw copy while loading: the Q6_K output matrix (431 MB), more than gate and
    # up with their joined copy (2 x 66 MB)
    assert llama.load_transient == (128256 * 4096 * 210 // 256,)
    assert llama.load_transient[0] > 2 * 2 * 14336 * 4096 * 144 // 256


def test_the_estimate_puts_everything_on_the_first_gpu(llama):
    est = hearth_estimate(llama, HearthConfig(8192, "q8", "rot4"), n_gpus=2)
    first, second = est.gpus
    items = hearth_items(llama, HearthConfig(8192, "q8", "rot4"))
    assert first.total == items.gpu_total
    assert second.total == 0
    assert est.host.weights == items.host_weights


def test_a_fused_sdpa_kernel_drops_the_scores(llama):
    """Where SDPA's memory-efficient kernel runs (kernels/grouped_attention.py; its gpu test
    passed on the H100, and the planner's default assumes it): no float32 scores and no K and
    V repeated per query head; the chunk's mask is the same on either path."""
    import dataclasses

    from engine.planner.hearth_memory import HEARTH_COSTS

    fused = dataclasses.replace(HEARTH_COSTS, prefill_scores_materialized=False)
    math = dataclasses.replace(HEARTH_COSTS, prefill_scores_materialized=True)
    config = HearthConfig(131072, "rot4", "rot4")  # a layer's attention above its GEMM
    math_path = hearth_items(llama, config, math).prefill_workspace
    scores = 2 * 32 * 512 * 131072 * 4
    repeated = 2 * 32 * 131072 * 128 * 2
    assert math_path - hearth_items(llama, config, fused).prefill_workspace == scores + repeated


@pytest.mark.parametrize(
    ("shape", "n_ctx", "kv", "masks"),
    [
        # 512 rows x 4 query heads a KV head, f16: 1 GiB at 256k positions, counted once
        ("llama3-8b", 262144, "q8/rot4", 2 * 4 * 512 * 262144),
        ("mistral-7b", 106496, "f16/f16", 2 * 4 * 512 * 106496),
        # rows padded to 16 keys: 1,000 -> 1,008
        ("llama3-8b", 1000, "q8/rot4", 2 * 4 * 512 * 1008),
        # kivi4 keys: the chunk's scratch (512 rows and a page of 64) as more keys
        ("llama3-8b", 65536, "kivi4/rot4", 2 * 4 * 512 * (65536 + 576)),
        # Gemma 3: a global and a local (sliding window) mask, 2 query heads a KV head
        ("gemma3-12b", 65536, "q8/rot4", 2 * 2 * 2 * 512 * 65536),
    ],
)
def test_a_chunk_keeps_one_mask_a_window_for_all_its_layers(
    synthetic_info, shape, n_ctx, kv, masks
):
    from engine.planner.hearth_memory import _chunk_rows, prefill_masks

    profile = HearthProfile.of(synthetic_info(shape, "Q4_K_M"))
    config = HearthConfig(n_ctx, *kv.split("/"))
    assert prefill_masks(profile.config, config, _chunk_rows(config)) == masks
    # kept beside a layer's peak, not made by each layer: the workspace holds it once
    assert masks < hearth_items(profile, config).prefill_workspace < 2 * masks + 4 * GIB


def test_the_mask_alignment_is_the_kernels():
    pytest.importorskip("torch")
    from engine.planner.prefill_masks import MASK_ALIGNMENT
    from kernels.prefill_masks import MASK_ALIGNMENT as KERNELS

    assert MASK_ALIGNMENT == KERNELS


def test_no_allocator_slack_is_counted_beside_the_workspaces(llama):
    """torch's reserved blocks beside the live peak are not modelled: the total is the
    weights, the cache and the workspaces as torch reserves them, and the context."""
    items = hearth_items(llama, HearthConfig(262144, "q8", "rot4"))
    running = items.kv_reserved + items.decode_workspace + items.prefill_workspace
    running += items.prefill_graph_pool
    assert items.gpu_total == items.weights_reserved + running + items.context
    assert hearth_estimate(llama, HearthConfig(262144, "q8", "rot4")).gpus[0].total == (
        items.gpu_total
    )


# Qwen3-30B-A3B: 48 layers, n_embd 2048, 128 experts of 768, 8 used
@pytest.fixture(scope="module")
def qwen3_moe(synthetic_info):
    return HearthProfile.of(synthetic_info("qwen3-30b-a3b", "Q4_K_M"))


def test_every_expert_is_on_the_gpu_and_none_is_a_prefill_gemm(qwen3_moe, synthetic_info):
    info = synthetic_info("qwen3-30b-a3b", "Q4_K_M")
    items = hearth_items(qwen3_moe, HearthConfig(32768))
    # 17.28 GiB: the experts' planes, byte for byte, and each layer's router folded with its
    # FFN norm and wo (routing beside wo: 128 x (2048 + 4096) float16 and 128 float32)
    folded = 48 * (128 * 6144 * 2 + 128 * 4)
    assert items.weights == info.weight_bytes + folded
    # the largest dequantized matrix is Q, K and V joined, not an expert tensor
    assert qwen3_moe.largest_matrix == (4096 + 512 + 512) * 2048
    # the largest raw copy while loading: the Q6_K output matrix (151936 x 2048, 243 MiB); an
    # expert tensor is read and made into planes before the next (128 x 768 x 2048 weights,
    # 158 MiB at Q6_K), not the layer's three at once (373 MiB)
    assert qwen3_moe.load_transient == (151936 * 2048 * 210 // 256,)
    assert qwen3_moe.load_transient[0] > 128 * 768 * 2048 * 210 // 256


@pytest.mark.parametrize(
    ("n_in", "splits"), [(768, 1), (2048, 1), (2880, 3), (4096, 2), (14336, 7)]
)
def test_expert_splits(n_in, splits):
    from engine.planner.moe_workspace import _expert_splits

    assert _expert_splits(n_in) == splits


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # the expert GEMV: router logits (4-byte activations here), int32 ids and float32
        # weights; routing tables of 8 pairs; x and h in 8 bits; gate/up's two float32
        # partial channels and h; down's partials and output
        (1, 128 * 4 + 8 * 8 + 4 * (8 + 24 + 1) + 2 * (2048 + 8 * 768)
         + 2 * 8 * 768 * 4 + 8 * 768 * 4 + 8 * 2048 * 4 + 2048 * 4),
        # 16 rows: 128 pairs in one launch
        (16, 16 * 128 * 4 + 128 * 8 + 4 * (128 + 3 * 128 + 1) + 2 * (16 * 2048 + 128 * 768)
         + 2 * 128 * 768 * 4 + 128 * 768 * 4 + 128 * 2048 * 4 + 16 * 2048 * 4),
        # 32 rows: 256 pairs, the most one expert GEMV launch takes
        (32, 32 * 128 * 4 + 256 * 8 + 4 * (256 + 3 * 128 + 1) + 2 * (32 * 2048 + 256 * 768)
         + 2 * 256 * 768 * 4 + 256 * 768 * 4 + 256 * 2048 * 4 + 32 * 2048 * 4),
        # 512 rows (4,096 pairs): the grouped GEMM; the router's logits, their float32 copy and
        # softmax, int64 ids and float32 weights; the sorted pairs, padding and count tables;
        # h in f16, down's float32 row per pair, the sum over slots and the output
        (512, 512 * 128 * (4 + 8) + 4096 * 12 + 4 * (4096 + 128 * 128 + 64 * 256 + 2 * 128)
         + 4096 * 768 * 2 + 4096 * 2048 * 4 + 512 * 2048 * (4 + 4)),
    ],
)  # fmt: skip
def test_moe_workspace(qwen3_moe, llama, rows, expected):
    from engine.planner.hearth_memory import HEARTH_COSTS
    from engine.planner.moe_workspace import moe_workspace

    assert moe_workspace(qwen3_moe.config, rows, HEARTH_COSTS.activation_bytes) == expected
    assert moe_workspace(llama.config, rows, HEARTH_COSTS.activation_bytes) == 0


def test_the_grouped_gemm_constants_are_the_kernels():
    pytest.importorskip("triton")
    from engine.planner.moe_workspace import _GROUPED_HISTOGRAM, GROUPED_BLOCK_M
    from kernels.moe_grouped_gemm import MAX_CHUNKS, default_config

    assert default_config(10**6, 8).block_m == GROUPED_BLOCK_M  # the largest block
    assert _GROUPED_HISTOGRAM == MAX_CHUNKS * 256  # 128 experts and the padding bin: 256 bins


def test_the_expert_gemv_constants_are_the_kernels():
    pytest.importorskip("triton")
    from engine.planner.moe_workspace import (
        _EXPERT_MAX_RUNS,
        EXPERT_PAIRS_PER_LAUNCH,
        _expert_splits,
    )
    from kernels.moe_gemv import MoeGemvConfig, _runs_per_split
    from kernels.moe_routing import MAX_PAIRS

    assert EXPERT_PAIRS_PER_LAUNCH == MAX_PAIRS
    assert MoeGemvConfig().max_runs == _EXPERT_MAX_RUNS
    for n_in in (768, 1408, 2048, 2880, 4096, 14336):
        runs = n_in // 16
        assert _expert_splits(n_in) == -(-runs // _runs_per_split(runs, _EXPERT_MAX_RUNS))


def test_a_qwen3_30b_a3b_q4_k_m_plans_on_a_24_gib_gpu_at_32k(qwen3_moe):
    items = hearth_items(qwen3_moe, HearthConfig(32768))
    # 21.5 GiB: 17.3 of weights, 3.0 of f16 KV, 0.75 of CUDA context, 0.43 of prefill
    # workspace (the chunk's mask, 8 query heads a KV head: 256 MiB)
    assert 21.0 * GIB < items.gpu_total < 22.0 * GIB


@pytest.mark.parametrize(
    ("n_ctx", "n_parallel", "pages"),
    [
        (4096, 1, 64),
        (4097, 1, 65),
        (4096, 4, 64),  # 1024 each: whole pages already
        (4096, 3, 66),  # 1365 each: 22 pages, 3 times
        (64 * 100, 64, 128),  # 100 positions each: 2 pages each
    ],
)
def test_a_batch_counts_each_sequences_pages(llama, n_ctx, n_parallel, pages):
    config = HearthConfig(n_ctx, "q8", "q8", n_parallel=n_parallel)
    assert config.kv_pages == pages
    sizes = kv_allocations(llama.config, config)
    extras = 4 * D + 8 * pages * n_parallel  # the rotation's signs, a block table per sequence
    assert sum(sizes) == pages * 64 * HEADS * (D + 2) * 2 * LAYERS + extras


def test_a_batch_decode_step_has_a_row_per_sequence(llama):
    from engine.planner.hearth_memory import HEARTH_COSTS, _logits_workspace, decode_workspace

    one = decode_workspace(llama.config, HearthConfig(4096, "q8", "q8"), HEARTH_COSTS)
    many = decode_workspace(
        llama.config, HearthConfig(4096, "q8", "q8", n_parallel=16), HEARTH_COSTS
    )
    assert many - one > 15 * _logits_workspace(llama.config)  # 16 rows of logits, not one


@pytest.mark.parametrize(
    ("shape", "heads", "dim", "group", "windows"),
    [("llama3-8b", 8, 128, 4, 1), ("gemma3-12b", 8, 256, 2, 2)],
)
def test_kivi4_keys_copy_the_gathered_rows_once_more(
    synthetic_info, shape, heads, dim, group, windows
):
    """kivi4's prefill appends the chunk's exact rows (512 and a page of 64) to the gathered
    K, then to V (torch.cat, one at a time: the gathered and the longer copy of one alive at
    once), keeps those rows (K and V) until the next layer's write, and its masks have them
    as more keys."""
    profile = HearthProfile.of(synthetic_info(shape, "Q4_K_M"))

    def prefill(k: str) -> int:
        return hearth_items(profile, HearthConfig(65536, k, "rot4")).prefill_workspace

    one_kv, scratch = heads * 65536 * dim * 2, heads * 576 * dim * 2
    masks = windows * 2 * group * 512 * 576
    kept = 2 * scratch  # K's and V's, one layer's
    assert prefill("kivi4") - prefill("rot4") == one_kv + 2 * scratch + kept + masks


def test_the_prefill_graphs_pool_holds_one_chunk_at_most_4096_slots(qwen3_moe):
    """engine/hearth/prefill_graph.py: one chunk's buffers at n_ubatch rows attending at most
    MAX_KEYS slots of one sequence (a batch's: n_ctx / n_parallel), and MAX_GRAPHS graphs'
    float32 logits row; none with experts in RAM."""
    from engine.hearth import prefill_graph
    from engine.planner.hearth_memory import (
        HEARTH_COSTS,
        PREFILL_GRAPH_MAX_GRAPHS,
        PREFILL_GRAPH_MAX_KEYS,
        prefill_graph_pool,
        prefill_workspace,
    )

    assert PREFILL_GRAPH_MAX_KEYS == prefill_graph.MAX_KEYS
    assert PREFILL_GRAPH_MAX_GRAPHS == prefill_graph.MAX_GRAPHS
    # 24 rows of 151,936 float32 logits (608 KB each, small blocks): 14.6 MB in 2 MiB segments
    logits = 7 * 2 * MIB
    at_4k = prefill_workspace(qwen3_moe, HearthConfig(4096), HEARTH_COSTS)
    for n_ctx in (4096, 32768):
        items = hearth_items(qwen3_moe, HearthConfig(n_ctx))
        assert items.prefill_graph_pool == at_4k + logits
    short = HearthConfig(1024)
    short_pool = prefill_workspace(qwen3_moe, short, HEARTH_COSTS) + logits
    assert prefill_graph_pool(qwen3_moe, short, HEARTH_COSTS) == short_pool
    assert hearth_items(qwen3_moe, HearthConfig(4096, ram_expert_layers=21)).prefill_graph_pool == 0
    assert (
        hearth_items(qwen3_moe, HearthConfig(4096, n_parallel=4)).prefill_graph_pool == short_pool
    )
    # it adds to the GPU's total beside the eager workspace
    items = hearth_items(qwen3_moe, HearthConfig(32768))
    without = dataclasses.replace(items, prefill_graph_pool=0)
    assert items.gpu_total - without.gpu_total == items.prefill_graph_pool
