"""GPU and host memory of the Hearth engine (engine/hearth) for one model, context and K/V pair.

The Hearth engine puts the whole model on one GPU (no layer split, no CPU layers), so the only
choices are the context and the K and V cache formats. What it allocates, item by item, as the
engine stands with its GPU path (engine/hearth/forward.py, ops.py, dequant.py, decode_graph.py,
kv_cache.py, paged_cache.py; kernels/kv_cache.py):

- weights (counted by hearth_weights.py, as are the experts in RAM below): every matrix but
  `token_embd` goes to the GPU as the file stores it; kernels' PackedWeight splits each into planes
  of its block fields (the same bytes, one allocation per field). Matrices that take the same input
  and share a block type and row length are joined at load (Q, K, V; gate, up): their raw bytes are
  concatenated on the GPU, then split into planes, so loading briefly holds the members' raw copies
  and the joined one (allocator slack afterwards). A type kernels/ does not pack (Q2_K, Q3_K) stays
  as raw bytes and is dequantized to float32 on its first use and kept (4 bytes a weight). Vectors
  (norms, biases) are float32. `token_embd` goes to the GPU too, as stored (the CUDA-graph decode
  step reads the next token's row there, and a prefill chunk its rows); a model without
  `output.weight` uses that one copy as its output matrix.
- experts (a mixture-of-experts model): every expert of every layer on the GPU, as the file
  stores them, split into the expert GEMV's planes (kernels.ExpertWeight: one [n_expert n_out,
  n_in] PackedWeight per tensor, the same bytes); expert biases float32. Each raw tensor is
  read onto the GPU, then split, before the next is read, so loading briefly holds one expert
  tensor twice (the load transient, kept in torch's cache afterwards).
  No expert is ever dequantized whole: a chunk of up to EXPERT_PAIRS_PER_LAUNCH (token,
  expert) pairs goes through the expert GEMV, a longer one (a prefill chunk) through the
  grouped GEMM, which decodes tiles in registers; so experts set no prefill GEMM's size.
- experts in RAM (HearthConfig.ram_expert_layers, engine/hearth/expert_offload.py): the last
  N layers' expert tensors leave the GPU for pinned host memory (the same planes, byte for
  byte), and each of those layers keeps a cache of `expert_cache_slots` experts on the GPU:
  the same planes with S of the n_expert experts' rows, or none (S = 0: read in place over
  the bus); engine/planner/hearth_offload.py chooses N and S and predicts the speed. The GPU
  maps those pinned pages (pinned_copy registers them with the driver): 8 bytes of device
  memory for each 4 KiB page, 2 MiB a GiB pinned (pinned_mapping).
- KV cache: f16/f32 in a plain [layers, kv heads, n_ctx, head dim] tensor per K and V; any
  other pair in kernels' paged cache: pages of 64 positions, per layer and role one allocation
  per field (kernels/kv_planes.py allocate_planes), bytes per row from kernels/kv_formats.py (scales
  and minimums included); kivi4 keys add each layer's open page.
- decode workspace, kept by the CUDA graph's private pool (decode_graph.py): the activations
  of one token (a MoE layer's: moe_workspace.py), the plain cache's one-query attention (scores
  over every slot: f16, float32 softmax, f16 probabilities per query head), the logits.
  kernels' paged decode needs only partial sums.
- prefill workspace (a chunk of n_ubatch rows, the last one attending over the whole context):
  float32 activations (a MoE layer's: moe_workspace.py); the chunk's attention masks, made
  once at its first layer and kept through all of them (one per distinct sliding window:
  additive f16, repeated for the query heads of a KV head, rows padded to 16 elements, the
  form SDPA's memory-efficient kernel reads without a copy; kernels/grouped_attention.py);
  kivi4 keys: the last written chunk's K and V rows in f16 (one for the cache, replaced by the
  next layer's write: kernels/kv_open_pages.py `scratch`); and
  the larger of a layer's two transient peaks, which never overlap: the largest (joined)
  matrix dequantized to f16 for torch's GEMM (kernels/dequant.py's one pass for Q4_K and Q6_K:
  nothing beside the result) with its product; or the attention over the whole context (the
  paged cache's pages gathered to f16; SDPA's memory-efficient kernel tiles the scores), or
  at the first layer the making of a mask (slot ids and booleans), where that is larger.
- overhead: the CUDA context, cuBLAS and Triton's modules (HEARTH_COSTS.context_bytes), and the
  rounding of torch's caching allocator, which the worker runs with expandable segments
  (engine/hearth/allocator.py): blocks of 512 bytes, small allocations (up to 1 MiB) packed in
  one segment mapped 2 MiB at a time, the others in another mapped 20 MiB at a time
  (torch_reserved). The load's raw copies are returned to torch's cache before the KV cache is
  made, which reuses their blocks: the peak is the weights with the larger of the two
  (HearthItems.gpu_total). No allocator slack beside the live peak is counted: no layer makes
  and frees a mask-sized buffer (the masks are made once a chunk), nothing a chunk keeps is
  made between one layer's transient buffers and the next's (kivi4's rows: one, freed before
  the next is made), and a buffer that finds no free block large enough grows the segment
  from its free end instead of taking a new segment of its own size
  (docs/decisions/2026-11-29-expandable-segments.md; benchmarks/hearth_memory.py cards shows
  what torch reserves beside its peak allocation).

The total is the process's peak (what NVML shows at the end of a prefill over the whole
context: torch keeps what the prefill reserved), which benchmarks/hearth_memory.py samples.
- host: the embedding table (mapped from the file), up to 4,096 of its rows kept dequantized
  (forward.Transformer.HOST_ROWS_KEPT), and the worker process with torch and the CUDA runtime.

The constants that only a device can settle are in HEARTH_COSTS, `calibrated=False` until
benchmarks/hearth_memory.py has measured them; it prints each item beside its measurement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from engine.hearth.cache_layout import PAGE_SIZE as PAGE
from engine.hearth.cache_layout import (
    PLANNED_DEVICE,
    PLANNED_OPS,
    CacheLayout,
    engine_cache_layout,
)
from engine.hearth.config import HOST_ROWS_KEPT, ModelConfig
from engine.hearth.page_pool import pages_for
from engine.planner.hearth_weights import (
    HearthProfile,
    host_expert_bytes,
    pinned_expert_bytes,
    pinned_mapping,
    weight_allocations,
)
from engine.planner.memory import DeviceMemory, MemoryEstimate
from engine.planner.moe_workspace import moe_workspace
from engine.planner.prefill_masks import mask_making, prefill_masks
from kernels.ggml_formats import FORMATS
from kernels.kv_formats import bytes_per_row, kivi_group

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class HearthCosts:
    """What only a measurement on the device settles (benchmarks/hearth_memory.py). Calibrated
    on the H100 (torch 2.11, Llama-3-8B Q4_K_M, contexts 4k and 32k, every K/V pair;
    docs/measurements/2026-11-25-hearth-memory-h100.*): the benchmark's suggestion, rounded up
    where a rounding could under-reserve."""

    # CUDA context, cuBLAS handle and workspace, Triton modules: 767 MiB measured (NVML's used
    # memory less torch's reserved, the same at every size)
    context_bytes: int = 768 * MIB
    activation_bytes: int = 4  # bytes per activation value (f16 between matrices: 2; kept 4)
    # a prefill GEMM's matrix in a format without kernels/dequant.py's one-pass kernel
    # (Q4_K, Q6_K have one: the f16 result and nothing beside it): what dequant_torch.py's
    # elementwise path keeps beside the f16 result, bytes a weight (not measured)
    dequant_bytes_per_weight: int = 4
    # kernels/grouped_attention.py folds grouped-query heads so that SDPA's memory-efficient
    # kernel runs: its gpu test passed on the H100 (no score matrix for 512 queries over 32k
    # positions), and the measured prefill workspace does not grow with the context as the
    # scores would
    prefill_scores_materialized: bool = False
    host_process_bytes: int = 2 * GIB  # the worker's RSS besides the model: torch, CUDA runtime
    calibrated: bool = True


HEARTH_COSTS = HearthCosts()


@dataclass(frozen=True)
class HearthConfig:
    n_ctx: int
    type_k: str = "f16"
    type_v: str = "f16"
    n_ubatch: int = 512  # rows per prefill chunk
    # sequences decoded together (engine/runtime/hearth_batch.py), n_ctx / n_parallel each
    n_parallel: int = 1
    ram_expert_layers: int = 0  # MoE: the last N layers keep their experts in host memory
    expert_cache_slots: int = 0  # ... each with a device cache of this many experts
    # ... or the CPU computes every pick of a token there (n_expert_used; 0: none;
    # expert_offload.ExpertsOnCpu)
    expert_cpu_picks: int = 0

    @property
    def kv_pages(self) -> int:
        """Pages of the KV cache: the context's, or with a batch, each sequence's share in
        whole pages (engine/runtime/hearth_batch.py sizes its pool so)."""
        if self.n_parallel <= 1:
            return pages_for(self.n_ctx, PAGE)
        return pages_for(self.n_ctx // self.n_parallel, PAGE) * self.n_parallel


@dataclass(frozen=True)
class HearthItems:
    """The estimate item by item, in bytes (what the benchmark prints beside its measurement)."""

    weights: int  # allocated for the weights on the GPU
    weights_reserved: int  # the same, as torch's allocator reserves it
    load_transient: int  # raw copies made while loading, returned to torch's cache (gpu_total)
    kv: int
    kv_reserved: int
    decode_workspace: int  # kept by the CUDA graph's own pool
    prefill_workspace: int  # the regular pool, at the last chunk of a full context
    context: int
    host_weights: int
    host_process: int
    host_experts: int = 0  # experts in RAM, pinned or ggml's copy (also in host_weights)
    pinned_mapping: int = 0  # device memory the driver maps those pinned pages with
    prefill_graph_pool: int = 0  # the prefill graphs' own pool (prefill_graph_pool)

    @property
    def gpu_total(self) -> int:
        """The process's peak: the load's raw copies are freed (into torch's cache) before the
        cache is made, whose allocations and the workspaces' then reuse those blocks, so the
        two never add up: the larger of them counts, above the weights and the overhead."""
        running = (
            self.kv_reserved + self.decode_workspace + self.prefill_workspace
            + self.prefill_graph_pool
        )  # fmt: skip
        overhead = self.context + self.pinned_mapping
        return self.weights_reserved + max(self.load_transient, running) + overhead


def round_block(size: int) -> int:
    return max(512, -(-size // 512) * 512)


def torch_reserved(sizes: Iterable[int]) -> int:
    """What torch's CUDA caching allocator reserves for these allocations, all live at once,
    with expandable segments (engine/hearth/allocator.py; c10/cuda/CUDACachingAllocator.cpp):
    blocks of 512 bytes; up to kSmallSize (1 MiB) in the small pool's segment, mapped
    kSmallBuffer (2 MiB) at a time, every larger one in the large pool's, mapped kLargeBuffer
    (20 MiB) at a time. A segment grows from its end, so its allocations lie side by side."""
    small = large = 0
    for size in sizes:
        block = round_block(size)
        if block <= MIB:
            small += block
        else:
            large += block
    return _segments(small, 2 * MIB) + _segments(large, 20 * MIB)


def _segments(total: int, segment: int) -> int:
    return -(-total // segment) * segment


# -- KV cache --------------------------------------------------------------------------------------


def gpu_cache_layout(type_k: str, type_v: str) -> CacheLayout:
    """The cache the driver builds for this pair on a GPU (the Hearth engine's only device)."""
    return engine_cache_layout(type_k, type_v, ops_name=PLANNED_OPS, device=PLANNED_DEVICE)


def kivi_scratch(cfg: ModelConfig, config: HearthConfig, rows: int) -> int:
    """kivi4 keys: the f16 K and V rows of a chunk of `rows` from its first page's start that
    its write goes through before they are sealed and its attention appends as exact keys
    (kernels/kv_open_pages.py `scratch`): one for the cache, kept until the next layer's write,
    which frees it before making its own."""
    if config.type_k != "kivi4":
        return 0
    return 2 * (rows + PAGE) * cfg.n_head_kv * cfg.head_dim * 2


def kv_allocations(cfg: ModelConfig, config: HearthConfig) -> list[int]:
    """The KV cache's allocations when the driver makes it (engine/hearth/caches.py)."""
    d, heads, layers = cfg.head_dim, cfg.n_head_kv, cfg.n_layer
    layout = gpu_cache_layout(config.type_k, config.type_v)
    if not layout.paged:
        positions = config.n_ctx if config.n_parallel <= 1 else config.kv_pages * PAGE
        return [layers * heads * positions * d * layout.plain_element_bytes] * 2
    rows = config.kv_pages * heads * PAGE  # positions x heads, whole pages
    sizes = []
    for fmt in (config.type_k, config.type_v):
        sizes += [rows * plane for plane in _planes(fmt, d)] * layers
    if config.type_k == "kivi4":  # per layer: each sequence's open page (K and V rows in f16)
        slots = 1 if config.n_parallel <= 1 else config.n_parallel + 1  # + the graphs' scratch
        sizes += [slots * 2 * heads * PAGE * d * 2] * layers
    # the rotation's signs (float32; the rotation itself is a fast Walsh-Hadamard transform, no
    # matrix), and a block table over the whole pool per sequence
    return [*sizes, 4 * d, 8 * config.kv_pages * max(1, config.n_parallel)]


def _planes(fmt: str, d: int) -> list[int]:
    """Bytes per row of each field kernels/kv_planes.py allocates for a format."""
    if fmt == "f16":
        return [2 * d]
    if fmt == "q8":
        return [d, 2]
    if fmt == "kivi4":  # codes; scale and min per group of positions and channel, f16
        share = 2 * d // kivi_group(PAGE)
        planes = [d // 2, share, share]
        assert sum(planes) == bytes_per_row(fmt, d, PAGE)
        return planes
    # codes; each row's scales and mins in one allocation (kernels/kv_planes.py interleaves them)
    planes = [d // (2 if fmt == "rot4" else 4), 4 * (d // 32)]
    assert sum(planes) == bytes_per_row(fmt, d)  # the format's own count, scales included
    return planes


def kv_bytes_per_token(cfg: ModelConfig, type_k: str, type_v: str) -> float:
    """Bytes one cached position takes over all layers (for rates; pages not counted)."""
    layout = gpu_cache_layout(type_k, type_v)
    if not layout.paged:
        return 2 * cfg.n_layer * cfg.n_head_kv * cfg.head_dim * layout.plain_element_bytes
    per_row = bytes_per_row(type_k, cfg.head_dim) + bytes_per_row(type_v, cfg.head_dim)
    return cfg.n_layer * cfg.n_head_kv * per_row


# -- workspace -------------------------------------------------------------------------------------


def _prefill_attention_buffers(
    cfg: ModelConfig, config: HearthConfig, rows: int, costs: HearthCosts
) -> tuple[int, ...]:
    """One layer's prefill attention for `rows` queries over n_ctx positions beside the
    chunk's masks: the buffers alive at its peak as the code allocates them (freed at the
    layer's end, so one layer's count):

    - K and V over the whole context in f16: the paged cache's pages gathered
      (kernels/kv_cache.py gather); the plain cache's slices, copied only when the cache is
      float32 (the queries are f16 on a GPU);
    - kivi4 keys: K, then V, with the chunk's rows appended (torch.cat: the gathered and the
      longer copy of one alive at once); the rows themselves are kept through the chunk
      (kivi_scratch, counted beside the masks);
    - kernels/grouped_attention.py: SDPA's memory-efficient kernel takes the chunk's mask as
      it is and tiles the scores. The folded queries and the output are a few rows'
      activations, counted with them.

    `prefill_scores_materialized`: torch's math path instead (K and V repeated for every query
    head, float32 scores and their softmax), for a torch without the fused kernel."""
    n, d = config.n_ctx, cfg.head_dim
    layout = gpu_cache_layout(config.type_k, config.type_v)
    copied = layout.paged or layout.plain_element_bytes == 4
    one_kv = cfg.n_head_kv * n * d * 2 if copied else 0
    if costs.prefill_scores_materialized:
        repeated = cfg.n_head * n * d * 2 if cfg.n_rep > 1 else 0
        scores = cfg.n_head * rows * n * 4
        return (one_kv, one_kv, repeated, repeated, scores, scores)
    if config.type_k == "kivi4":
        longer = one_kv + cfg.n_head_kv * (rows + PAGE) * d * 2
        return (one_kv, longer, longer)
    return (one_kv, one_kv)


def _prefill_attention(
    cfg: ModelConfig, config: HearthConfig, rows: int, costs: HearthCosts
) -> int:
    """One layer's prefill attention at its peak beside the chunk's masks
    (_prefill_attention_buffers), or the making of a mask where that is larger."""
    layer = sum(_prefill_attention_buffers(cfg, config, rows, costs))
    return max(layer, mask_making(cfg, config, rows))


def _decode_attention(cfg: ModelConfig, config: HearthConfig) -> int:
    if gpu_cache_layout(config.type_k, config.type_v).paged:
        # kernels' split-K decode: partial sums per head and split (a few splits per SM)
        return 4 * cfg.n_head * 64 * (cfg.head_dim + 2) * 4
    # TorchKVCache._attend_one: f16 scores, the masked copy, float32 softmax, f16 probabilities
    # and the slot ids, over every slot of the cache
    return cfg.n_head * config.n_ctx * (2 + 2 + 4 + 2) + 8 * config.n_ctx


def _logits_workspace(cfg: ModelConfig) -> int:
    # logits, probabilities, a sorted copy with int64 indices, the kept mask (sampler.py)
    return cfg.n_vocab * (4 + 4 + 4 + 8 + 1)


def decode_workspace(cfg: ModelConfig, config: HearthConfig, costs: HearthCosts) -> int:
    """One decode step's peak: what the CUDA graph's private pool keeps (decode_graph.py); a
    batch's step has a row per sequence."""
    rows = max(1, config.n_parallel)
    widest = max(cfg.n_embd, 2 * cfg.n_ff, (cfg.n_head + 2 * cfg.n_head_kv) * cfg.head_dim)
    act = costs.activation_bytes
    activations = rows * 8 * widest * act + moe_workspace(cfg, rows, act)
    return activations + _decode_attention(cfg, config) + rows * _logits_workspace(cfg)


# formats kernels/dequant.py dequantizes in one pass on a GPU (the f16 result, nothing beside)
_ONE_PASS_DEQUANT = {FORMATS[name].ggml_type for name in ("Q4_K", "Q6_K")}
_F16_AS_STORED = FORMATS["F16"].ggml_type  # the plane is the GEMM's operand as it is


def _prefill_gemm(profile: HearthProfile, rows: int, costs: HearthCosts) -> int:
    """The largest (joined) matrix of a layer dequantized to f16 for one GEMM of the chunk
    (engine/hearth/ops.py KernelsOps.matmul, freed when it returns), and its f16 product."""
    cfg, values = profile.config, profile.largest_matrix
    if profile.largest_matrix_type == _F16_AS_STORED:
        dense = 0
    elif profile.largest_matrix_type in _ONE_PASS_DEQUANT:
        dense = 2 * values
    else:
        dense = (2 + costs.dequant_bytes_per_weight) * values
    n_out = max(values // max(1, cfg.n_embd), cfg.n_embd)
    return dense + rows * n_out * 2


def _chunk_rows(config: HearthConfig) -> int:
    """Rows of the last prefill chunk of a full context."""
    return max(1, min(config.n_ubatch, config.n_ctx))


def prefill_workspace(profile: HearthProfile, config: HearthConfig, costs: HearthCosts) -> int:
    """A prefill chunk's peak above the weights and the cache (the last chunk of a full
    context): the chunk's activations (a bound: every buffer a layer makes, float32), its
    attention masks (made once, kept through every layer: prefill_masks) and kivi4's rows
    (one layer's at a time, kept until the next layer's write: kivi_scratch), the logits of
    its last row, and the larger of a layer's two transient peaks, which never overlap: the
    largest matrix's GEMM (its f16 copy) and the attention over the whole context."""
    cfg = profile.config
    rows = _chunk_rows(config)
    qkv = (cfg.n_head + 2 * cfg.n_head_kv) * cfg.head_dim
    per_row = 3 * cfg.n_embd + qkv + cfg.n_head * cfg.head_dim + 3 * cfg.n_ff
    act = costs.activation_bytes
    activations = rows * per_row * act + moe_workspace(cfg, rows, act)
    transient = max(
        _prefill_gemm(profile, rows, costs), _prefill_attention(cfg, config, rows, costs)
    )
    kept = prefill_masks(cfg, config, rows) + kivi_scratch(cfg, config, rows)
    return activations + kept + transient + _logits_workspace(cfg)


# engine/hearth/prefill_graph.py's bounds (the planner imports no torch; a test keeps them equal):
# chunks reading more slots than this run eagerly, and at most this many graphs are kept
PREFILL_GRAPH_MAX_KEYS = 4096
PREFILL_GRAPH_MAX_GRAPHS = 24


def prefill_graph_pool(profile: HearthProfile, config: HearthConfig, costs: HearthCosts) -> int:
    """What the prefill CUDA graphs' private pool holds beside the eager chunks' workspace
    (prefill_workspace, in torch's regular pool): the graphs share the pool and never replay
    at once, so it holds one chunk's buffers at the largest shape captured (n_ubatch rows
    attending at most PREFILL_GRAPH_MAX_KEYS slots of one sequence: prefill_workspace at that
    context; a batch's sequence holds n_ctx / n_parallel, engine/hearth/batch_chunks.py) and
    each kept graph's output, its last row's float32 logits. None with experts in RAM (their
    chunks run eagerly: PrefillGraphs.can_capture). Reasoned from the code, not yet measured
    (benchmarks/hearth_memory.py's cards)."""
    if config.ram_expert_layers:
        return 0
    keys = min(config.n_ctx // max(1, config.n_parallel), PREFILL_GRAPH_MAX_KEYS)
    one_sequence = dataclasses.replace(config, n_ctx=keys, n_parallel=1)
    chunk = prefill_workspace(profile, one_sequence, costs)
    logits = [profile.config.n_vocab * 4] * PREFILL_GRAPH_MAX_GRAPHS
    return chunk + torch_reserved(logits)


# -- the estimate ----------------------------------------------------------------------------------


def hearth_items(
    profile: HearthProfile, config: HearthConfig, costs: HearthCosts = HEARTH_COSTS
) -> HearthItems:
    """Every item of the Hearth engine's memory for `config`."""
    kv = kv_allocations(profile.config, config)
    weights = weight_allocations(profile, config)
    in_ram = host_expert_bytes(profile, config)
    return HearthItems(
        weights=sum(round_block(s) for s in weights),
        weights_reserved=torch_reserved(weights),
        load_transient=torch_reserved(profile.load_transient),
        kv=sum(round_block(s) for s in kv),
        kv_reserved=torch_reserved(kv),
        decode_workspace=decode_workspace(profile.config, config, costs),
        prefill_workspace=prefill_workspace(profile, config, costs),
        prefill_graph_pool=prefill_graph_pool(profile, config, costs),
        context=costs.context_bytes,
        host_weights=profile.embedding_bytes + HOST_ROWS_KEPT * profile.config.n_embd * 4 + in_ram,
        host_process=costs.host_process_bytes,
        host_experts=in_ram,
        pinned_mapping=pinned_mapping(pinned_expert_bytes(profile, config)),
    )


def hearth_estimate(
    profile: HearthProfile,
    config: HearthConfig,
    n_gpus: int = 1,
    costs: HearthCosts = HEARTH_COSTS,
) -> MemoryEstimate:
    """The estimate in the planner's shape: everything on the first GPU, none on the others."""
    items = hearth_items(profile, config, costs)
    workspace = items.decode_workspace + items.prefill_workspace + items.prefill_graph_pool
    # the load's raw copies count only where they outgrow what reuses them (gpu_total)
    load_excess = max(0, items.load_transient - items.kv_reserved - workspace)
    overhead = items.context + items.pinned_mapping + load_excess
    first = DeviceMemory(items.weights_reserved, items.kv_reserved, workspace, overhead)
    others = (DeviceMemory(0, 0, 0, 0),) * max(0, n_gpus - 1)
    host = DeviceMemory(items.host_weights, 0, 0, items.host_process)
    full = profile.config.n_layer + 1
    return MemoryEstimate((first, *others), host, ((0, full),) * min(1, n_gpus), full)
