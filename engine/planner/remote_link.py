"""The network's cost per decoded token for devices on helper machines (llama.cpp's RPC).

    for every helper device holding layers:
        ROUND_TRIPS x link latency + (bytes up + bytes down) / link bandwidth

What crosses the link each step, counted on real decodes (benchmarks/rpc_traffic.py,
docs/measurements/2026-11-25-rpc-traffic-*-cpu.json): llama.cpp's RPC client sends the graph
once and then only asks the helper to run it again (GRAPH_RECOMPUTE); it sends it anew when the
KV cache's padded size steps (every 256 cells), about GRAPH_BYTES_PER_LAYER per layer. Up: the
hidden state (and a second row of it), the attention mask (2 bytes per KV cell in use) and a
few small inputs. Down: the logits (n_vocab floats: 196,608 bytes for SmolLM2's 49,152-token
vocabulary, 1,048,576 for Gemma 3's 262,144) when the helper holds the output layer, else the
hidden state. Answered requests: 1.7-1.9 per token (results read back), taken as 2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine.planner.backends import BackendProfile, backend
from engine.planner.profile import ModelProfile
from engine.planner.records import DeviceBudget, PlanRequest

ROUND_TRIPS = 2
UP_BASE_BYTES = 3000  # request headers, serialized tensor descriptions, positions, output ids
DOWN_BASE_BYTES = 4096
MASK_BYTES_PER_CELL = 2  # the f16 attention mask row
GRAPH_BYTES_PER_LAYER = 12_000  # serialized graph nodes of one layer (11-12 kB measured)
GRAPH_RESEND_TOKENS = 256  # the graph changes when the KV cache's padded size steps
DEFAULT_LINK_BYTES_PER_S = 1e9 / 8 * 0.9  # 1 GbE, when the link was not measured
DEFAULT_LINK_LATENCY_S = 0.0005


def device_backend(device: DeviceBudget) -> BackendProfile:
    """The memory profile of a device: its backend's; on a helper, without op_offload (an RPC
    device takes no host-weight operations: ggml-rpc.cpp's offload_op is NULL)."""
    profile = backend(device.backend)
    return dataclasses.replace(profile, offloads_ops=False) if device.rpc_server else profile


def network_seconds_per_token(
    profile: ModelProfile,
    n_ctx: int,
    ranges: Sequence[tuple[int, int]],
    gpus: Sequence[DeviceBudget],
) -> float:
    """Seconds each decoded token spends on the network, for the layer `ranges` per device
    (memory.layer_ranges: n_layer is the output layer) over a conversation filling `n_ctx`."""
    seconds = 0.0
    for (lo, hi), gpu in zip(ranges, gpus, strict=True):
        if gpu.rpc_server is None or hi <= lo:
            continue
        holds_output = hi == profile.n_layer + 1
        n_layers = min(hi, profile.n_layer) - lo
        traffic = traffic_bytes_per_token(profile, n_ctx, n_layers, holds_output)
        seconds += link_seconds(traffic, gpu)
    return seconds


def traffic_bytes_per_token(
    profile: ModelProfile, n_ctx: int, n_layers: int, holds_output: bool
) -> int:
    """Bytes a decode step sends to and from one helper device holding `n_layers` repeating
    layers (and the output layer or not), at half the context filled."""
    up = UP_BASE_BYTES + 2 * profile.n_embd * 4 + MASK_BYTES_PER_CELL * max(1, n_ctx // 2)
    up += n_layers * GRAPH_BYTES_PER_LAYER // GRAPH_RESEND_TOKENS
    down = DOWN_BASE_BYTES + 4 * (profile.n_vocab if holds_output else profile.n_embd)
    return up + down


def link_seconds(n_bytes: int, gpu: DeviceBudget) -> float:
    latency = gpu.link_latency_s if gpu.link_latency_s is not None else DEFAULT_LINK_LATENCY_S
    rate = gpu.link_bytes_per_s or DEFAULT_LINK_BYTES_PER_S
    return ROUND_TRIPS * latency + n_bytes / rate


def rpc_servers(request: PlanRequest) -> tuple[str, ...]:
    """The helpers a plan for `request` attaches, in device order."""
    return tuple(dict.fromkeys(g.rpc_server for g in request.gpus if g.rpc_server))
