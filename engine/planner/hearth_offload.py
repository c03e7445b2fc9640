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

GB = 1e9


@dataclass(frozen=True)
class OffloadCosts:
    """What only a device measures (benchmarks/moe_offload.py prints each beside its
    prediction). The rates are the H200 host's (a PCIe 5.0 x16 card, 16 cores under KVM),
    fitted to the runs named below; a desktop on PCIe 4.0 moves about half."""

    # pinned host -> device copies: 55.0 and 55.4 GB/s measured (PCIe 5.0 x16)
    host_link_gbps: float = 55.0
    # a Hearth MoE decode step's fixed cost (its launches, about ten a layer, each waiting on
    # the one before) and the share of the GPU's nominal bandwidth its bytes are read at: the
    # Qwen3-30B-A3B step all on an H200 takes 1.922 ms for 1.97 GB
    # (docs/measurements/2026-11-30-s25-call-3): 1.0 ms fixed and 0.92 ms at 0.445 of 4.8 TB/s.
    # One step fits both only together; the split between them is an estimate
    step_overhead_s: float = 1.0e-3
    gpu_efficiency: float = 0.445
    # kernels reading pinned host memory in place get this share of the copy rate: 21 layers'
    # experts read in place (514 MB a token) ran 84.4 tok/s at a 55.4 GB/s copy rate, 11.85 ms a
    # token of which 9.93 beyond the GPU's step: 51.8 GB/s, 0.93 of the copy rate
    # (docs/measurements/2026-11-30-s25-call-5/offload.txt)
    in_place_efficiency: float = 0.93
    # ggml's CPU experts (15 threads of the H200 host's 16 cores, ggml's OpenMP team kept off
    # the main thread; Q4_K repacked as llama.cpp repacks it; decision 0020): called directly,
    # 52 us a pick (3.06 MB: 58.9 GB/s) and 59 us a call (111 us for 1 pick, 475 for 8:
    # docs/measurements/2026-11-30-s26-call-1/probe.txt). The figures are this thread count's
    # (the driver's default: the physical cores less one); fewer cores compute slower
    cpu_expert_gbps: float = 58.9
    # per layer and token computed on the CPU, beside the picks: ggml's fixed cost and the host
    # node's (its hand-off to a driver thread and back, the copies to and from pinned memory,
    # the GIL; 88-126 us more than a direct call in the probe's graphs): every pick of 21 layers on
    # the CPU ran 74.7 tok/s, 13.39 ms a token, 11.47 beyond the GPU's step: 546 us a layer, 416
    # of them the 8 picks (docs/measurements/2026-11-30-s25-call-5/offload.txt)
    host_call_s: float = 130e-6
    # a token's picks split (engine/hearth/staged_experts.py): ggml called directly on the
    # stepping thread, its picks 1.11x slower beside the copies (289 against 260 us for 4
    # picks: the probe above). Its fixed cost a call: 59 us there with llama.cpp's graph, 15 us
    # less in three nodes (176.2 against 161.3 us at 4 picks, 145.2 against 126.3 at 3:
    # docs/decisions/2026-11-30-ggml-experts-in-three-nodes.md). The pause a layer in RAM costs
    # beyond the longer of the two halves (the graph piece's own GPU work, the host's Python,
    # the copies' start) fitted to the code as it is: 20 layers of Qwen3-30B-A3B in RAM on a
    # 12 GiB card, 4 of 8 picks by ggml (the share the load's tuning chose in every run), ran
    # 114.3, 115.1 and 115.9 tok/s on two hosts (docs/measurements/2026-11-30-s35-call-{2,3,4}):
    # 64 us. The same costs predict 201 tok/s for 9 layers on a 16 GiB card (measured 193.1)
    # and 105 for gpt-oss-20b's 12 on an 8 GiB card (measured 90.9: ggml reads MXFP4 at about
    # 0.7 of its Q4_K rate, which one rate for every format does not say)
    direct_call_s: float = 44e-6
    cpu_beside_copies: float = 1.11
    split_pause_s: float = 64e-6
    # whether the planner may choose a split: measured faster than reading in place on the
    # H200's hosts (99.9 / 92.5 against 83.8 / 82.3 tok/s, calls 6 and 8)
    split_placements_measured: bool = True
    # per layer per token without the CUDA graph (a cache's steps run eagerly): eager decode
    # ran 26.6-28.8 tok/s for a 32-layer model on the H100 (docs/performance.md), about 1.1 ms
    # a layer of launches from Python
    eager_layer_s: float = 1.1e-3
    # per layer with a cache per token: reading the routing back, its copies' launches
    ram_layer_s: float = 40e-6
    # whether the planner may choose every pick on the CPU: the costs above predict the H200
    # host's runs (84.4 / 74.7 tok/s read in place / every pick on the CPU),
    # pick the in-place read there, and every pick on the CPU where the link is slow (a PCIe
    # 4.0 x16 desktop at 25 GB/s): test_hearth_offload
    cpu_placements_measured: bool = True


OFFLOAD_COSTS = OffloadCosts()


@dataclass(frozen=True)
class OffloadSpeed:
    misses_per_token: float  # experts copied per token (even routing)
    link_bytes_per_token: float
    gpu_bytes_per_token: float
    tokens_per_second: float


def fewest_ram_layers(fits: Callable[[int, int], bool], n_layer: int, min_slots: int) -> int | None:
    """The fewest layers (1..n_layer) whose experts in RAM, with min_slots each, fit; None when
    no count does. GPU memory falls as layers move to RAM and host memory grows, so the counts
    that fit are a run: where all of them fit the GPU's side alone binds and a bisection finds
    the fewest; where all do not (host memory too small for every layer's experts), the run
    ends before n_layer and a walk up from 1 finds its start."""
    if not fits(n_layer, min_slots):
        return next((n for n in range(1, n_layer) if fits(n, min_slots)), None)
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

    `cpu_picks` k (no cache): every pick of a layer in RAM computed by the CPU (ggml,
    cpu_layer_seconds), nothing crossing the link; 0: none; between (a split): the other
    picks copied over the link while ggml computes these, split_layer_seconds a layer."""
    if not 0 <= cpu_picks <= n_expert_used:
        raise ValueError(f"{cpu_picks} of {n_expert_used} picks on the CPU")
    if cpu_picks and slots:
        raise ValueError("experts computed on the CPU take no device cache")
    split = 0 < cpu_picks < n_expert_used
    if split:
        misses = float(ram_layers * (n_expert_used - cpu_picks))
    else:
        misses = 0.0 if cpu_picks else misses_per_token(ram_layers, slots, n_expert, n_expert_used)
    link = misses * expert_bytes
    gpu = dense_bytes + all_expert_bytes * n_expert_used / n_expert + kv_bytes_read
    if slots:
        link_rate = costs.host_link_gbps * GB
        per_layer = n_layer * costs.eager_layer_s + ram_layers * costs.ram_layer_s
    else:
        link_rate = costs.host_link_gbps * GB * costs.in_place_efficiency
        per_layer = 0.0
    if split:
        ram = ram_layers * split_layer_seconds(n_expert_used, cpu_picks, expert_bytes, costs)
    elif cpu_picks:
        ram = ram_layers * cpu_layer_seconds(n_expert_used, expert_bytes, costs)
    else:
        ram = link / link_rate if ram_layers else 0.0
    seconds = (
        costs.step_overhead_s
        + gpu / (gpu_bandwidth_gbps * GB * costs.gpu_efficiency)
        + ram
        + per_layer
    )
    return OffloadSpeed(misses, link, gpu, 1.0 / seconds)


def cpu_layer_seconds(k: int, expert_bytes: int, costs: OffloadCosts = OFFLOAD_COSTS) -> float:
    """One layer in RAM a token with its k picks computed by the CPU: the picks at ggml's rate
    and the host call's fixed cost."""
    return k * expert_bytes / (costs.cpu_expert_gbps * GB) + costs.host_call_s


def split_layer_seconds(k: int, cpu_picks: int, expert_bytes: int,
                        costs: OffloadCosts = OFFLOAD_COSTS) -> float:  # fmt: skip
    """One layer in RAM a token with its picks split: the k - c copies over the link (one copy
    an expert, at the copy rate) beside ggml's c picks called directly (slower beside the
    copies), whichever is longer, and the pause."""
    copies = (k - cpu_picks) * expert_bytes / (costs.host_link_gbps * GB)
    picks = cpu_picks * expert_bytes / (costs.cpu_expert_gbps * GB) * costs.cpu_beside_copies
    cpu = picks + costs.direct_call_s
    return max(copies, cpu) + costs.split_pause_s
