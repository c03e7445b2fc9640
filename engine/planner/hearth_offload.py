"""The Hearth engine with a mixture-of-experts model's experts in system RAM: which layers, how
big a device cache, and what it costs per token (engine/hearth/expert_offload.py runs it).

    placement = choose_placement(fits, n_layer, n_expert, n_expert_used)  # (N, S) or None
    speed = offload_speed(..., ram_layers=N, slots=S, ...)

The engine keeps the last N layers' routed experts in pinned host memory; everything else stays
on the GPU as without offload. Either the GPU reads the experts a token picks in place, over the
host link (S = 0), or each such layer has a device cache of S experts (least recently used out)
and a step first copies the picked experts that are not cached. So:

- VRAM: the model less the N layers' expert tensors, plus S experts' worth of each of them
  (hearth_memory.hearth_items does the bytes; `fits(N, S)` asks it);
- RAM: the N layers' experts, pinned (they cannot be swapped out);
- per token: every layer reads its k picked experts as before; of a layer in RAM, all k cross
  the link when read in place, and k (1 - S / n_expert) on average with a cache when the router
  picks experts evenly (LRU then keeps a random S of n_expert; a real router prefers some
  experts, which the cache keeps, so this is the pessimistic end). Those bytes cross the link at
  its rate. With a cache, each layer in RAM also reads its routing back to the host and the step
  runs without the CUDA graph, eagerly: about a millisecond a layer (OffloadCosts), which is
  why the in-place reading is predicted faster unless the link is much slower than that.

Placement with a cache: the fewest layers in RAM (a resident layer never misses), then as many
slots as fit: under even routing a slot saves as many bytes per token as a resident layer's
share, so leftover memory is worth the same either way, and slots also catch a skewed router's
favourites. In place: the fewest layers in RAM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.planner.backends import DECODE_OVERHEAD_S

GB = 1e9


@dataclass(frozen=True)
class OffloadCosts:
    """What only a device measures (benchmarks/moe_offload.py prints each beside its
    prediction). The link and CPU rates are the H200 host's of 2026-11-29
    (docs/measurements/2026-11-29-s16-call-1/offload: a PCIe 5.0 x16 card, 16 cores); a
    desktop on PCIe 4.0 moves about half."""

    # pinned host -> device copies: 55.0 and 55.4 GB/s measured (PCIe 5.0 x16)
    host_link_gbps: float = 55.0
    # the share of the GPU's nominal bandwidth a MoE decode step reads at, beside the fixed
    # DECODE_OVERHEAD_S: the Qwen3-30B-A3B step all on an H200 ran 365.4 tok/s without
    # launching ahead (docs/measurements/2026-11-29-s16-call-1/qwen3.txt), 2.74 ms for 1.97 GB
    gpu_efficiency: float = 0.55
    # kernels reading pinned host memory in place get this share of the copy rate: the same
    # run with 21 layers read in place took 12.3 ms a token (81.2 tok/s), 9.6 ms more than
    # the GPU's part, for 514 MB read in place: 53.6 GB/s of the 55.0 copied (rounded down)
    in_place_efficiency: float = 0.93
    # ggml's CPU experts (16 threads, Q4_K repacked as llama.cpp repacks it): bytes of picked
    # experts read per second. llama-bench at --n-cpu-moe 18 and 48 (92.2 and 43.6 tok/s):
    # 30 layers more on the CPU cost 12.1 ms a token, 0.40 ms a layer for its 8 picks (22.4
    # MiB): 58 GB/s. Ours are the same kernels over the same layout
    # (engine/hearth/cpu_experts.py); that they run as fast from a host node is unmeasured.
    cpu_expert_gbps: float = 58.0
    # per layer and token computed on the CPU: the step's copies to and from pinned memory,
    # the host node's hand-off to a driver thread and back, the GIL and ggml's call
    # (estimated: 11-88 us of ggml's own overhead measured on a loaded 2-core machine,
    # benchmarks/cpu_experts.py; the host node's latency is unmeasured)
    host_call_s: float = 60e-6
    # what the host's memory delivers to both pipes together (the CPU's reads and the bus's
    # come from the same DRAM): not measured; a server's 8-12 DDR5 channels give 300-450 GB/s
    # nominal, a dual-channel desktop 60-90
    host_memory_gbps: float = 150.0
    # per layer per token without the CUDA graph (a cache's steps run eagerly): eager decode
    # ran 26.6-28.8 tok/s for a 32-layer model on the H100 (docs/performance.md), about 1.1 ms
    # a layer of launches from Python
    eager_layer_s: float = 1.1e-3
    # per layer with a cache per token: reading the routing back, its copies' launches
    ram_layer_s: float = 40e-6
    calibrated: bool = False
    # whether the planner may choose the CPU's placements (every pick, or a split with the
    # in-place read): only once a GPU host measures them faster than the in-place read. Their
    # first run (docs/measurements/2026-11-29-s16-call-4/offload) gave 42.8 tok/s with every
    # pick on the CPU and 19.2 split, against 66.5 read in place in the same run (ggml took
    # 868 and 1,828 us a layer-token in the host nodes, against the ~400 llama.cpp's CPU
    # takes): slower, for a reason not yet found
    cpu_placements_measured: bool = False


OFFLOAD_COSTS = OffloadCosts()


@dataclass(frozen=True)
class OffloadSpeed:
    misses_per_token: float  # experts copied per token (even routing)
    link_bytes_per_token: float
    gpu_bytes_per_token: float
    tokens_per_second: float


def fewest_ram_layers(fits: Callable[[int, int], bool], n_layer: int, min_slots: int) -> int | None:
    """The fewest layers (1..n_layer) whose experts in RAM, with min_slots each, fit; None when
    not even all of them do. Memory falls as layers move to RAM, so a bisection finds it."""
    if not fits(n_layer, min_slots):
        return None
    lo, hi = 1, n_layer
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid, min_slots):
            hi = mid
        else:
            lo = mid + 1
    return lo


def most_slots(fits: Callable[[int, int], bool], ram_layers: int, lo: int, hi: int) -> int:
    """The most slots in [lo, hi] that fit with `ram_layers` layers in RAM (lo must fit)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(ram_layers, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def choose_placement(
    fits: Callable[[int, int], bool], n_layer: int, n_expert: int, n_expert_used: int
) -> tuple[int, int] | None:
    """(layers in RAM, cache slots per layer): the fewest layers, then the most slots (module
    docstring); None when even every layer in RAM with one token's experts cached does not
    fit. A cache of every expert would be a resident layer, so at most n_expert - 1 slots."""
    ram_layers = fewest_ram_layers(fits, n_layer, n_expert_used)
    if ram_layers is None:
        return None
    top = max(n_expert_used, n_expert - 1)
    return ram_layers, most_slots(fits, ram_layers, n_expert_used, top)


def misses_per_token(ram_layers: int, slots: int, n_expert: int, n_expert_used: int) -> float:
    """Experts crossing the link per token under even routing: k (1 - S / n_expert) per layer
    in RAM (all k when read in place, S = 0)."""
    return ram_layers * n_expert_used * (1.0 - min(slots, n_expert) / n_expert)


def offload_speed(
    *,
    n_layer: int,
    n_expert: int,
    n_expert_used: int,
    expert_bytes: int,
    dense_bytes: int,
    all_expert_bytes: int,
    kv_bytes_read: float,
    ram_layers: int,
    slots: int,
    gpu_bandwidth_gbps: float,
    costs: OffloadCosts = OFFLOAD_COSTS,
    cpu_picks: int = 0,
) -> OffloadSpeed:
    """Predicted decode speed: the GPU reads the non-expert weights it uses (dense_bytes), the
    picked experts' share of every layer's (all_expert_bytes k / n_expert) and kv_bytes_read;
    the misses cross the host link; with a cache, plus the eager step's and the routing's
    per-layer costs. The parts add up: a layer's experts are read after its router.

    `cpu_picks` (read in place only): of each layer in RAM's k picks, that many are computed
    by the CPU (ggml) while the GPU reads the others in place; the layer costs the slower of
    the two, the CPU's with its host call (cpu_ram_layer_seconds). k: all on the CPU."""
    if cpu_picks and slots:
        raise ValueError("experts computed on the CPU take no device cache")
    misses = misses_per_token(ram_layers, slots, n_expert, n_expert_used)
    if cpu_picks:
        misses = ram_layers * (n_expert_used - min(cpu_picks, n_expert_used))
    link = misses * expert_bytes
    gpu = dense_bytes + all_expert_bytes * n_expert_used / n_expert + kv_bytes_read
    if slots:
        link_rate = costs.host_link_gbps * GB
        per_layer = n_layer * costs.eager_layer_s + ram_layers * costs.ram_layer_s
    else:
        link_rate = costs.host_link_gbps * GB * costs.in_place_efficiency
        per_layer = 0.0
    if cpu_picks:
        ram = ram_layers * cpu_ram_layer_seconds(cpu_picks, n_expert_used, expert_bytes, costs)
    else:
        ram = link / link_rate if ram_layers else 0.0
    seconds = (
        DECODE_OVERHEAD_S + gpu / (gpu_bandwidth_gbps * GB * costs.gpu_efficiency) + ram + per_layer
    )
    return OffloadSpeed(misses, link, gpu, 1.0 / seconds)


def cpu_ram_layer_seconds(cpu_picks: int, k: int, expert_bytes: int,
                          costs: OffloadCosts = OFFLOAD_COSTS) -> float:  # fmt: skip
    """One layer in RAM a token with `cpu_picks` of its k picks on the CPU and the rest read in
    place by the GPU at the same time: the slower of the two pipes (the CPU's with its host
    call). Both read the same DRAM; on the H200 host their sum (about 100 GB/s) is within
    its memory's rate, on a dual-channel desktop it is not (docs/decisions/0020)."""
    m = min(cpu_picks, k)
    cpu = m * expert_bytes / (costs.cpu_expert_gbps * GB) + costs.host_call_s if m else 0.0
    bus = (k - m) * expert_bytes / (costs.host_link_gbps * GB * costs.in_place_efficiency)
    dram = k * expert_bytes / (costs.host_memory_gbps * GB)
    return max(cpu, bus, dram)


def best_cpu_picks(k: int, expert_bytes: int, costs: OffloadCosts = OFFLOAD_COSTS) -> int:
    """The CPU's share of a layer's k picks that makes the layer fastest: 0 (all read in
    place by the GPU) to k (all on the CPU), by the two measured rates (decision 0020:
    m / k = R_cpu / (R_cpu + R_bus), rounded to the faster whole pick)."""
    return min(range(k + 1), key=lambda m: cpu_ram_layer_seconds(m, k, expert_bytes, costs))
