"""GPU and host memory of the Hearth engine (engine/hearth) for one model, context and K/V pair.

The Hearth engine puts the whole model on one GPU (no layer split, no CPU layers), so the only
choices are the context and the K and V cache formats. What it allocates, item by item, as the
code stands (engine/hearth/forward.py, ops.py, kv_cache.py, paged_cache.py; kernels/):

- weights: every matrix but `token_embd` goes to the GPU as the file stores it; kernels'
  PackedWeight splits each into planes of its block fields (the same bytes, one allocation per
  field). A type kernels/ does not pack (Q2_K, Q3_K) stays as raw bytes and is dequantized to
  float32 on its first use and kept (4 bytes a weight). Vectors (norms, biases) are float32.
  `token_embd` stays in host memory (its rows are read there); a model without `output.weight`
  uses it as the output matrix, which is then packed on the GPU as well. Loading copies each
  matrix's raw bytes to the GPU before splitting it: the largest such copy stays in torch's
  cache afterwards (allocator slack).
- KV cache: f16/f32 in a plain [layers, kv heads, n_ctx, head dim] tensor per K and V; any
  other pair in kernels' paged cache: pages of 64 positions, per layer and role one allocation
  per field (kernels/kv_cache.py _allocate), bytes per row from kernels/kv_formats.py
  (scales and minimums included).
- workspace: a decode step and a prefill chunk (n_ubatch rows) run in float32 (KernelsOps'
  dtype). Attention over the plain cache, and a prefill chunk over the paged one (whose rows are
  read back to float32), goes through torch's scaled_dot_product_attention with a boolean mask
  and grouped-query heads: its math path copies K and V to float32, repeats them for every
  query head and materializes the scores and their softmax, at the full cache length (a decode
  step on a GPU attends over the whole cache, masked, for fixed shapes). A prefill chunk also
  dequantizes one matrix at a time to float32 for torch's GEMM.
- overhead: the CUDA context, cuBLAS and Triton's modules (HEARTH_COSTS.context_bytes), and the
  rounding of torch's caching allocator (blocks of 512 bytes, 2 MiB segments for small
  allocations, 20 MiB for medium ones, large ones rounded to 2 MiB).

The constants that only a device can settle are in HEARTH_COSTS, `calibrated=False` until
benchmarks/hearth_memory.py has measured them; each item above is printed there beside its
measurement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.gguf import ModelInfo, TensorInfo
from engine.hearth.capabilities import uses_paged_cache
from engine.hearth.config import ModelConfig, model_config
from engine.planner.memory import DeviceMemory, MemoryEstimate
from kernels.ggml_formats import FORMATS
from kernels.kv_formats import bytes_per_row

MIB = 1024 * 1024
GIB = 1024 * MIB
PAGE = 64  # positions per page of kernels' paged cache (engine/hearth/paged_cache.py)
_PLAIN_BYTES = {"f16": 2, "f32": 4}
_PACKED = {f.ggml_type: f for f in FORMATS.values()}
_EMBEDDING = "token_embd.weight"


@dataclass(frozen=True)
class HearthCosts:
    """What only a measurement on the device settles (benchmarks/hearth_memory.py)."""

    context_bytes: int = 512 * MIB  # CUDA context, cuBLAS handle and workspace, Triton modules
    activation_bytes: int = 4  # bytes per activation value: KernelsOps computes in float32
    host_process_bytes: int = 2 * GIB  # the worker's RSS besides the model: torch, CUDA runtime
    calibrated: bool = False


HEARTH_COSTS = HearthCosts()


@dataclass(frozen=True)
class HearthConfig:
    n_ctx: int
    type_k: str = "f16"
    type_v: str = "f16"
    n_ubatch: int = 512  # rows per prefill chunk


@dataclass(frozen=True)
class HearthItems:
    """The estimate item by item, in bytes (what the benchmark prints beside its measurement)."""

    weights: int  # allocated for the weights on the GPU
    weights_reserved: int  # the same, as torch's allocator reserves it
    load_transient: int  # the largest raw copy made while loading (kept in torch's cache)
    kv: int
    kv_reserved: int
    decode_workspace: int
    prefill_workspace: int
    context: int
    host_weights: int
    host_process: int

    @property
    def gpu_total(self) -> int:
        workspace = max(self.decode_workspace, self.prefill_workspace)
        return (
            self.weights_reserved + self.load_transient + self.kv_reserved + workspace
            + self.context
        )  # fmt: skip


def round_block(size: int) -> int:
    return max(512, -(-size // 512) * 512)


def torch_reserved(sizes: Iterable[int]) -> int:
    """What torch's CUDA caching allocator reserves for these allocations, all live at once
    (c10/cuda/CUDACachingAllocator.cpp: kSmallSize 1 MiB in 2 MiB segments, up to kMinLargeAlloc
    10 MiB in 20 MiB segments, larger ones rounded up to kRoundLarge 2 MiB)."""
    small = medium = large = 0
    for size in sizes:
        block = round_block(size)
        if block <= MIB:
            small += block
        elif block < 10 * MIB:
            medium += block
        else:
            large += -(-block // (2 * MIB)) * 2 * MIB
    return _segments(small, 2 * MIB) + _segments(medium, 20 * MIB) + large


def _segments(total: int, segment: int) -> int:
    return -(-total // segment) * segment


# -- weights ---------------------------------------------------------------------------------------


def _matrix_allocations(t: TensorInfo) -> list[int]:
    """The GPU allocations one matrix keeps: its packed planes, or raw bytes + float32."""
    fmt = _PACKED.get(t.ggml_type)
    if fmt is None:
        return [t.n_bytes, 4 * t.n_elements]
    n_out = t.n_elements // t.shape[0]
    blocks = t.shape[0] // fmt.block_size
    return [n_out * blocks * length for _name, _offset, length, _dtype in fmt.fields]


def _gpu_tensors(info: ModelInfo) -> list[TensorInfo]:
    """The tensors the engine puts on the GPU: all but the embedding, which comes back as the
    output matrix of a model without `output.weight`."""
    names = {t.name for t in info.tensors}
    out = [t for t in info.tensors if t.name != _EMBEDDING]
    if "output.weight" not in names:
        out += [t for t in info.tensors if t.name == _EMBEDDING]
    return out


@dataclass(frozen=True)
class HearthProfile:
    """What the estimate needs from one file, worked out once (a slider re-plans on every move)."""

    info: ModelInfo
    config: ModelConfig
    weight_allocations: tuple[int, ...]  # every weight allocation on the GPU
    largest_raw: int  # the largest raw matrix copied to the GPU while loading
    largest_matrix: int  # values of the largest layer matrix (dequantized for a prefill GEMM)
    embedding_bytes: int  # token_embd, in host memory
    values_on_gpu: int  # values of every tensor the GPU holds (float32 each on the CPU path)

    @classmethod
    def of(cls, info: ModelInfo) -> HearthProfile:
        """Raises engine.hearth.config.UnsupportedModel for a file the engine does not run."""
        sizes: list[int] = []
        largest_raw = 0
        on_gpu = _gpu_tensors(info)
        for t in on_gpu:
            if len(t.shape) >= 2:
                sizes += _matrix_allocations(t)
                largest_raw = max(largest_raw, t.n_bytes)
            else:
                sizes.append(4 * t.n_elements)  # vectors become float32
        layer_matrices = [
            t.n_elements for t in info.tensors if t.layer is not None and len(t.shape) >= 2
        ]
        embedding = info.tensor(_EMBEDDING)
        return cls(
            info=info,
            config=model_config(info),
            weight_allocations=tuple(sizes),
            largest_raw=largest_raw,
            largest_matrix=max(layer_matrices, default=0),
            embedding_bytes=embedding.n_bytes if embedding is not None else 0,
            values_on_gpu=sum(t.n_elements for t in on_gpu),
        )


# -- KV cache --------------------------------------------------------------------------------------


def kv_allocations(cfg: ModelConfig, config: HearthConfig) -> list[int]:
    """The KV cache's allocations on the GPU."""
    d, heads, layers = cfg.head_dim, cfg.n_head_kv, cfg.n_layer
    if not uses_paged_cache(config.type_k, config.type_v):
        element = _PLAIN_BYTES[config.type_k if config.type_k == config.type_v else "f32"]
        return [layers * heads * config.n_ctx * d * element] * 2
    rows = -(-config.n_ctx // PAGE) * heads * PAGE  # positions x heads, whole pages
    sizes = []
    for fmt in (config.type_k, config.type_v):
        sizes += [rows * plane for plane in _planes(fmt, d)] * layers
    return [*sizes, 4 * d * d, 4 * d, 8 * -(-config.n_ctx // PAGE)]  # rotation, block table


def _planes(fmt: str, d: int) -> list[int]:
    """Bytes per row of each field kernels/kv_cache.py allocates for a format."""
    if fmt == "f16":
        return [2 * d]
    if fmt == "q8":
        return [d, 2]
    planes = [d // (2 if fmt == "rot4" else 4), 2 * (d // 32), 2 * (d // 32)]
    assert sum(planes) == bytes_per_row(fmt, d)  # the format's own count, scales included
    return planes


def kv_bytes_per_token(cfg: ModelConfig, type_k: str, type_v: str) -> float:
    """Bytes one cached position takes over all layers (for rates; pages not counted)."""
    if not uses_paged_cache(type_k, type_v):
        element = _PLAIN_BYTES[type_k if type_k == type_v else "f32"]
        return 2 * cfg.n_layer * cfg.n_head_kv * cfg.head_dim * element
    per_row = bytes_per_row(type_k, cfg.head_dim) + bytes_per_row(type_v, cfg.head_dim)
    return cfg.n_layer * cfg.n_head_kv * per_row


# -- workspace -------------------------------------------------------------------------------------


def _attention_workspace(cfg: ModelConfig, rows: int, n_keys: int, act: int) -> int:
    """torch SDPA's math path over n_keys cached positions for `rows` queries: K and V copied
    to the activation type, repeated for every query head, scores and softmax, the mask."""
    kv_copy = 2 * cfg.n_head_kv * n_keys * cfg.head_dim * act
    repeated = 2 * cfg.n_head * n_keys * cfg.head_dim * act if cfg.n_rep > 1 else 0
    scores = 2 * cfg.n_head * rows * n_keys * act
    return kv_copy + repeated + scores + rows * n_keys


def _sampler_workspace(cfg: ModelConfig) -> int:
    # logits, probabilities, a sorted copy with int64 indices, the kept mask (sampler.py)
    return cfg.n_vocab * (4 + 4 + 4 + 8 + 1)


def decode_workspace(cfg: ModelConfig, config: HearthConfig, costs: HearthCosts) -> int:
    act = costs.activation_bytes
    widest = max(cfg.n_embd, cfg.n_ff, cfg.n_head * cfg.head_dim)
    activations = 8 * widest * act
    if uses_paged_cache(config.type_k, config.type_v):
        # kernels' split-K decode: partial sums per head and split (a few per SM), tiny
        attention = 4 * cfg.n_head * 64 * (cfg.head_dim + 2) * 4
    else:
        attention = _attention_workspace(cfg, 1, config.n_ctx, act)
    return activations + attention + _sampler_workspace(cfg)


def prefill_workspace(profile: HearthProfile, config: HearthConfig, costs: HearthCosts) -> int:
    cfg = profile.config
    act = costs.activation_bytes
    rows = max(1, min(config.n_ubatch, config.n_ctx))
    q_dim, kv_dim = cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim
    activations = rows * (3 * cfg.n_embd + 2 * q_dim + 2 * kv_dim + 3 * cfg.n_ff) * act
    dense = 4 * profile.largest_matrix  # PackedWeight.dequantize: float32
    # the last chunk attends over the whole context
    attention = _attention_workspace(cfg, rows, config.n_ctx, act)
    return activations + dense + attention + _sampler_workspace(cfg)


# -- the estimate ----------------------------------------------------------------------------------


def hearth_items(
    profile: HearthProfile, config: HearthConfig, costs: HearthCosts = HEARTH_COSTS
) -> HearthItems:
    """Every item of the Hearth engine's memory for `config`."""
    kv = kv_allocations(profile.config, config)
    return HearthItems(
        weights=sum(round_block(s) for s in profile.weight_allocations),
        weights_reserved=torch_reserved(profile.weight_allocations),
        load_transient=torch_reserved([profile.largest_raw]),
        kv=sum(round_block(s) for s in kv),
        kv_reserved=torch_reserved(kv),
        decode_workspace=decode_workspace(profile.config, config, costs),
        prefill_workspace=prefill_workspace(profile, config, costs),
        context=costs.context_bytes,
        host_weights=profile.embedding_bytes,
        host_process=costs.host_process_bytes,
    )


def hearth_estimate(
    profile: HearthProfile,
    config: HearthConfig,
    n_gpus: int = 1,
    costs: HearthCosts = HEARTH_COSTS,
) -> MemoryEstimate:
    """The estimate in the planner's shape: everything on the first GPU, none on the others."""
    items = hearth_items(profile, config, costs)
    workspace = max(items.decode_workspace, items.prefill_workspace)
    first = DeviceMemory(
        items.weights_reserved, items.kv_reserved, workspace, items.context + items.load_transient
    )
    others = (DeviceMemory(0, 0, 0, 0),) * max(0, n_gpus - 1)
    host = DeviceMemory(items.host_weights, 0, 0, items.host_process)
    full = profile.config.n_layer + 1
    return MemoryEstimate((first, *others), host, ((0, full),) * min(1, n_gpus), full)
