"""Decode speed from memory bandwidth: each token reads the weights it uses once.

    time per token = sum over devices of bytes read there / (bandwidth x efficiency)
                     + a fixed cost per token (DECODE_OVERHEAD_S)

Bytes read per token on a device: its dense layer weights, the active share of its MoE expert
weights (experts used / expert count), the output matrix if the output layer is there, and the
KV cache of its layers at half the planned context (an average over a conversation that fills
it). Devices run one after another during decode (layer split), so times add up.
Efficiencies are per backend in engine/planner/backends.py, to be calibrated against measured
tokens per second (benchmarks/planner_accuracy.py records both).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.planner.backends import (
    BACKENDS,
    DECODE_OVERHEAD_S,
    DEFAULT_CPU_BANDWIDTH_GBPS,
    BackendProfile,
)
from engine.planner.kv_cache import cells
from engine.planner.memory import Config
from engine.planner.profile import ModelProfile
from engine.planner.tables import kv_tables, weight_tables

CPU = BACKENDS["cpu"]
UNKNOWN_GPU_BANDWIDTH_GBPS = 300.0  # when detection found no figure: a mid-range card


def bytes_read_per_token(
    profile: ModelProfile,
    config: Config,
    ranges: Sequence[tuple[int, int]],
    gpus: Sequence[BackendProfile],
    kv: bool = True,
) -> tuple[list[int], int]:
    """(bytes per token on each GPU, bytes per token in host memory), for the GPU layer
    `ranges` of memory.layer_ranges(); `kv=False` counts the weights alone."""
    n = profile.n_layer
    active = profile.n_expert_used / profile.n_expert if profile.is_moe else 0.0
    exp_lo = n - (min(config.n_cpu_expert_layers, n) if profile.is_moe else 0)
    fill = max(1, config.n_ctx // 2)
    n_cells = cells(config.n_ctx, profile.swa_window, config.n_ubatch, config.swa_full)
    read_cells = (min(fill, n_cells[0]), min(fill, n_cells[1]))

    def kv_read(backend: BackendProfile, lo: int, hi: int) -> int:
        if not kv:
            return 0
        tables = kv_tables(profile, config.type_k, config.type_v, not config.flash_attn, backend)
        return tables.bytes(lo, hi, read_cells)

    per_gpu = []
    for backend, (lo, hi) in zip(gpus, ranges, strict=True):
        wt = weight_tables(profile, backend)
        runs_output = hi == n + 1 and hi > lo
        lo, top = min(lo, n), min(hi, n)
        gpu_experts = wt.experts_sum(lo, min(top, max(exp_lo, lo)))
        total = wt.dense_sum(lo, top) + int(active * gpu_experts) + kv_read(backend, lo, top)
        if runs_output:
            total += profile.output_matrix_bytes(backend)
        per_gpu.append(total)

    wt = weight_tables(profile, CPU)
    n_gpu_layers = sum(hi - lo for lo, hi in ranges)
    host_layers = min(n + 1 - n_gpu_layers, n)
    host_experts = wt.experts_sum(0, host_layers) + wt.experts_sum(max(exp_lo, host_layers), n)
    host = wt.dense_sum(0, host_layers) + int(active * host_experts)
    host += kv_read(CPU, 0, host_layers)
    if n_gpu_layers == 0:
        host += profile.output_matrix_bytes(CPU)
    return per_gpu, host


def tokens_per_second(
    per_gpu: Sequence[int],
    host: int,
    gpus: Sequence[BackendProfile],
    gpu_bandwidth_gbps: Sequence[float | None],
    host_bandwidth_gbps: float | None,
) -> float:
    seconds = DECODE_OVERHEAD_S
    for read, backend, gbps in zip(per_gpu, gpus, gpu_bandwidth_gbps, strict=True):
        bandwidth = (gbps or UNKNOWN_GPU_BANDWIDTH_GBPS) * 1e9 * backend.decode_efficiency
        seconds += read / bandwidth
    if host:
        bandwidth = (host_bandwidth_gbps or DEFAULT_CPU_BANDWIDTH_GBPS) * 1e9
        seconds += host / (bandwidth * CPU.decode_efficiency)
    return 1.0 / seconds
