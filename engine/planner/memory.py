"""Memory per device for one candidate configuration: weights, KV cache, compute, overhead.

Layer placement follows llama_model_base::load_tensors (src/llama-model.cpp):

    i_gpu_start    = max(n_layer + 1 - n_gpu_layers, 0)
    act_gpu_layers = min(n_gpu_layers, n_layer + 1)
    layer il (0 <= il <= n_layer, il == n_layer being the output layer) is on a GPU iff
    il >= i_gpu_start; which GPU: upper_bound(split points, (il - i_gpu_start) / act_gpu_layers)

so the output layer is the *first* thing offloaded (n_gpu_layers = 1 offloads only it) and the
repeating layers follow from the last one backwards. With tensor_split set to the per-GPU layer
counts the split points fall exactly on those counts. Input tensors stay in host memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from engine.planner.backends import BACKENDS, COMPUTE, HOST_PROCESS_BYTES, BackendProfile
from engine.planner.compute import OP_OFFLOAD_MIN_BATCH, DeviceWork, device_compute, stages
from engine.planner.compute import host_compute as host_compute_bytes
from engine.planner.kv_cache import cells
from engine.planner.profile import ModelProfile
from engine.planner.tables import kv_tables, weight_tables

CPU = BACKENDS["cpu"]


@dataclass(frozen=True)
class Config:
    """One way to load a model: what the search varies."""

    n_ctx: int
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = True
    n_gpu_layers: int = 0  # llama.cpp's meaning: the output layer counts as one
    n_cpu_expert_layers: int = 0  # the last N layers keep their MoE experts in host memory
    gpu_layer_counts: tuple[int, ...] = ()  # offloaded layers per GPU (output layer included)
    n_ubatch: int = 512
    swa_full: bool = False
    n_outputs_max: int = 0  # 0: llama.cpp's default (a whole micro-batch of logits)


class DeviceMemory(NamedTuple):
    weights: int
    kv: int
    compute: int
    overhead: int

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute + self.overhead


@dataclass(frozen=True)
class MemoryEstimate:
    gpus: tuple[DeviceMemory, ...]
    host: DeviceMemory
    layer_ranges: tuple[tuple[int, int], ...]  # per GPU: [lo, hi) over 0..n_layer (output = n)
    n_gpu_layers: int


def layer_counts(n_offloaded: int, n_gpus: int, weights: Sequence[float] | None = None):
    """Split `n_offloaded` layers over GPUs in proportion to `weights` (largest remainder)."""
    if n_gpus <= 1:
        return (n_offloaded,) if n_gpus == 1 else ()
    shares = list(weights) if weights else [1.0] * n_gpus
    total = sum(shares) or 1.0
    exact = [n_offloaded * s / total for s in shares]
    counts = [int(x) for x in exact]
    order = sorted(range(n_gpus), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in order[: n_offloaded - sum(counts)]:
        counts[i] += 1
    return tuple(counts)


def layer_ranges(n_layer: int, n_gpu_layers: int, counts: Sequence[int]):
    """Per GPU, the [lo, hi) range of layer indices it holds (n_layer is the output layer)."""
    ranges, lo = [], n_layer + 1 - n_gpu_layers
    for count in counts:
        ranges.append((lo, lo + count))
        lo += count
    return tuple(ranges)


def estimate(
    profile: ModelProfile, config: Config, gpus: Sequence[BackendProfile]
) -> MemoryEstimate:
    n = profile.n_layer
    ngl = max(0, min(config.n_gpu_layers, n + 1)) if gpus else 0
    counts = config.gpu_layer_counts or layer_counts(ngl, len(gpus))
    if sum(counts) != ngl or len(counts) != len(gpus):
        raise ValueError(f"gpu_layer_counts {counts} do not add up to {ngl} offloaded layers")
    ranges = layer_ranges(n, ngl, counts)
    n_cells = cells(config.n_ctx, profile.swa_window, config.n_ubatch, config.swa_full)
    v_trans = not config.flash_attn
    n_exp_cpu = min(config.n_cpu_expert_layers, n) if profile.is_moe else 0
    exp_lo = n - n_exp_cpu  # layers [exp_lo, n) keep their experts in host memory
    host_layers = min(n + 1 - ngl, n)
    output_on_host = ngl == 0

    # -- host ------------------------------------------------------------------------------------
    wt_cpu = weight_tables(profile, CPU)
    kt_cpu = kv_tables(profile, config.type_k, config.type_v, v_trans, CPU)
    host_weights = profile.input_bytes(CPU) + wt_cpu.dense_sum(0, host_layers)
    host_weights += wt_cpu.experts_sum(0, host_layers)
    host_weights += wt_cpu.experts_sum(max(exp_lo, host_layers), n)
    if output_on_host:  # mmap: a tied output shares the embedding's pages
        host_weights += profile.output_bytes(CPU) - (
            profile.output_matrix_bytes(CPU) if profile.tied_embeddings else 0
        )
    host_kv = kt_cpu.bytes(0, host_layers, n_cells)

    # -- GPUs ------------------------------------------------------------------------------------
    gpu_mem = []
    pipeline = len(gpus) > 1 and ngl == n + 1 and n_exp_cpu == 0
    first_offloading = next((i for i, b in enumerate(gpus) if b.offloads_ops), None)
    for index, (backend, (lo, hi)) in enumerate(zip(gpus, ranges, strict=True)):
        wt = weight_tables(profile, backend)
        kt = kv_tables(profile, config.type_k, config.type_v, v_trans, backend)
        runs_output = hi == n + 1 and hi > lo
        lo, layers_hi = min(lo, n), min(hi, n)
        weights = wt.dense_sum(lo, layers_hi) + wt.experts_sum(lo, min(layers_hi, max(exp_lo, lo)))
        if runs_output:
            weights += profile.output_bytes(backend)
        kv = kt.bytes(lo, layers_hi, n_cells)
        has_full, has_swa = kt.kinds(lo, layers_hi)
        # op_offload runs host-weight operations of prompt batches on the first GPU, whichever
        # GPU holds the layer (ggml-backend.cpp: the first backend whose offload_op accepts)
        takes_host_ops = index == first_offloading
        remote_experts = wt.largest_expert_suffix[exp_lo] if takes_host_ops and exp_lo < n else 0
        work = DeviceWork(layers_hi > lo, has_swa, has_full, runs_output, 0, False, False,
                          remote_experts, 0, pipeline)  # fmt: skip
        if takes_host_ops and config.n_ubatch >= OP_OFFLOAD_MIN_BATCH:
            host_kinds = kt_cpu.kinds(0, host_layers)
            work = _with_host_work(profile, work, wt, host_layers, host_kinds, output_on_host)
        s = _stages(profile, config, n_cells, backend)
        compute = _adjust_unknown(profile, device_compute(s, work, profile.n_embd))
        overhead = backend.context_bytes + int(
            backend.pool_bytes_per_token_row * 4 * s.tokens * profile.widest_row
        )
        if profile.is_moe and (work.has_layers or work.remote_expert_weight):
            moe_row = max(1, profile.n_expert_used) * (profile.n_embd + profile.n_ff_exp)
            overhead += int(backend.moe_pool_bytes_per_token_row * 4 * s.tokens * moe_row)
        gpu_mem.append(DeviceMemory(weights, kv, compute, overhead))

    s_host = _stages(profile, config, n_cells, CPU)
    everything = DeviceWork(n > 0, profile.swa_window > 0, True, True)
    host_compute = _adjust_unknown(
        profile, host_compute_bytes(s_host, profile.n_embd, not gpus, everything)
    )
    output_buffer = 4 * profile.n_vocab * max(1, min(config.n_outputs_max or 1, s_host.tokens))
    host = DeviceMemory(host_weights, host_kv, host_compute, HOST_PROCESS_BYTES + output_buffer)
    return MemoryEstimate(tuple(gpu_mem), host, ranges, ngl)


def _stages(profile: ModelProfile, config: Config, n_cells, backend: BackendProfile):
    return stages(
        profile,
        n_cells,
        config.n_ubatch,
        config.flash_attn,
        config.type_k,
        config.type_v,
        config.n_outputs_max,
        backend,
    )


def _with_host_work(profile, work, wt, host_layers, host_kinds, output_on_host) -> DeviceWork:
    """Prompt batches run host layers' operations on the first GPU (op_offload)."""
    if not host_layers and not output_on_host:
        return work
    has_full, has_swa = host_kinds
    return work._replace(
        runs_output=work.runs_output or output_on_host,
        remote_layer_weight=wt.largest_dense_prefix[host_layers],
        remote_kv_full=has_full,
        remote_kv_swa=has_swa,
        remote_expert_weight=max(work.remote_expert_weight, wt.largest_expert_prefix[host_layers]),
        remote_output_weight=profile.output_matrix_bytes(CPU) if output_on_host else 0,
    )


def _adjust_unknown(profile: ModelProfile, compute: int) -> int:
    if profile.known_architecture or not compute:
        return compute
    return int(compute * COMPUTE.unknown_factor) + COMPUTE.unknown_reserve_bytes
