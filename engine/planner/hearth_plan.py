"""Plans for the Hearth engine: whether it can run a file here, the longest context each K/V pair
fits on the GPU, the pair a preference picks, and the memory of a choice made by hand.

    plan_hearth(info, request)                   -> Plan (engine "hearth"), or why not
    longest_context(info, request, type_k, type_v) -> tokens
    longest_context_experts_in_ram(info, request, type_k, type_v) -> (tokens, placement)

The Hearth engine keeps the whole model on the first GPU (no layer split, no CPU layers), so the
search is over the context and the K/V pair only: memory grows with the context, so the longest
context of each pair is a bisection. A mixture-of-experts model that does not fit may keep the
last layers' experts in system RAM, read in place over the bus or behind a cache of experts on
the GPU, or computed by the CPU (ggml, where its library is here;
engine/planner/hearth_offload.py): then the longest context is the one the leanest placement
fits (every layer's experts in RAM), and at that context the fastest (predicted) of the fewest
layers read in place, the fewest layers with the most cache slots, and as many layers as read
in place with their experts on the CPU (where the host holds ggml's copy instead); the plan
predicts its decode speed. A placement is (layers in RAM, cache slots[, k: every pick computed
by the CPU]). Only pairs whose quality was
measured (engine_table) are picked; the Model page may still choose any pair the engine holds
(engine/planner/manual.py plans that choice).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gguf import ModelInfo
from engine.hearth.capabilities import (
    device_unsupported_reason,
    kv_format_problem,
    model_unsupported_reason,
)
from engine.planner.engine_table import HEARTH, UNUSABLE_KL, kv_cost, measured_kv_pairs
from engine.planner.explain import gib, usage_of
from engine.planner.hearth_memory import (
    HEARTH_COSTS,
    HearthConfig,
    hearth_estimate,
    kv_bytes_per_token,
)
from engine.planner.hearth_offload import (
    OFFLOAD_COSTS,
    OffloadCosts,
    OffloadSpeed,
    choose_placement,
    fewest_ram_layers,
    offload_speed,
)
from engine.planner.hearth_weights import HearthProfile, host_expert_bytes
from engine.planner.kv_cache import CTX_PAD, pad_to
from engine.planner.memory import MemoryEstimate
from engine.planner.records import (
    DOES_NOT_FIT,
    FITS,
    HIGH,
    LOW,
    Alternative,
    Choice,
    Plan,
    PlanRequest,
    cpu_share_text,
)
from engine.planner.search import DEFAULT_TARGET_CTX, Search
from engine.planner.settings import LoadSettings
from engine.planner.speed import UNKNOWN_GPU_BANDWIDTH_GBPS

_PROFILES: dict[int, HearthProfile] = {}


def hearth_profile(info: ModelInfo) -> HearthProfile:
    """HearthProfile.of(info), kept for the same header object (sliders re-plan often)."""
    found = _PROFILES.get(id(info))
    if found is None or found.info is not info:
        if len(_PROFILES) > 16:
            _PROFILES.clear()
        found = _PROFILES[id(info)] = HearthProfile.of(info)
    return found


def hearth_unavailable(info: ModelInfo, request: PlanRequest) -> str | None:
    """Why the Hearth engine cannot run this file on the request's first GPU, or None."""
    reason = model_unsupported_reason(info)
    if reason:
        return reason
    if not request.gpus:
        return "no GPU: the Hearth engine runs on NVIDIA GPUs (CUDA, compute capability 8.0+)"
    gpu = request.gpus[0]
    return device_unsupported_reason(gpu.backend, gpu.compute_capability)


def pair_problem(profile: HearthProfile, type_k: str, type_v: str, gpu: bool = True) -> str | None:
    cfg = profile.config
    return kv_format_problem(
        type_k, type_v, sliding_window=cfg.swa_window > 0, head_dim=cfg.head_dim, gpu=gpu
    )


def auto_pairs(
    profile: HearthProfile, n_parallel: int = 1, left_out: tuple[tuple[str, str], ...] = ()
) -> list[tuple[str, str]]:
    """The pairs Best fit may pick for this model: measured, good enough, held here, not among
    those its own KV check found to hurt it (`left_out`), and for several sequences at once
    not kivi4 keys: a batch takes them when asked (engine/hearth/batch_cache.py), but runs
    their prompt chunks eagerly (engine/hearth/batch_chunks.py) and has no serving figure."""
    return [
        pair
        for pair in measured_kv_pairs(HEARTH)
        if (kv_cost(HEARTH, *pair) or 0.0) < UNUSABLE_KL
        and not pair_problem(profile, *pair)
        and not (n_parallel > 1 and pair[0] == "kivi4")
        and pair not in left_out
    ]


ON_GPU = (0, 0)  # (layers whose experts are in RAM, cache slots per such layer): none


@dataclass(frozen=True)
class _Candidate:
    pair: tuple[str, str]
    n_ctx: int
    estimate: MemoryEstimate
    cost: float
    experts: tuple[int, ...] = ON_GPU  # (layers in RAM, cache slots[, cpu picks])


def cpu_picks_of(experts) -> int:
    """Of a placement (layers, slots[, cpu picks]), the picks the CPU computes (0: none)."""
    return experts[2] if len(experts) > 2 else 0


def cpu_experts_available() -> bool:
    """Whether ggml's CPU library is here for the CPU to compute experts."""
    from engine.hearth.ggml_cpu import available

    return available()


def _estimate(profile, search: Search, pair, n_ctx: int, experts=ON_GPU) -> MemoryEstimate:
    request = search.request
    config = HearthConfig(
        n_ctx, *pair, min(request.n_ubatch, n_ctx), request.n_parallel,
        ram_expert_layers=experts[0], expert_cache_slots=experts[1],
        expert_cpu_picks=cpu_picks_of(experts),
    )  # fmt: skip
    return hearth_estimate(profile, config, len(search.gpus))


def _longest(profile, search: Search, pair, lo: int, hi: int, experts=ON_GPU) -> int:
    """The longest context in [lo, hi] (multiples of CTX_PAD) that fits; 0 when lo does not."""
    steps_lo, steps_hi = lo // CTX_PAD, hi // CTX_PAD
    if search.shortfall(_estimate(profile, search, pair, lo, experts)) > 0:
        return 0
    while steps_lo < steps_hi:
        mid = (steps_lo + steps_hi + 1) // 2
        if search.shortfall(_estimate(profile, search, pair, mid * CTX_PAD, experts)) <= 0:
            steps_lo = mid
        else:
            steps_hi = mid - 1
    return steps_lo * CTX_PAD


def _bounds(info: ModelInfo, request: PlanRequest) -> tuple[int, int]:
    """(the shortest context worth planning, the target), multiples of CTX_PAD."""
    train = info.context_length or 4096
    target = pad_to(max(CTX_PAD, request.target_ctx or min(train, DEFAULT_TARGET_CTX)), CTX_PAD)
    return min(pad_to(max(CTX_PAD, request.min_ctx), CTX_PAD), target), target


def longest_context(info: ModelInfo, request: PlanRequest, type_k: str, type_v: str) -> int:
    """The longest context up to the request's target that this K/V pair fits on the first
    GPU (0: not even the minimum); the pair is not checked against the model here."""
    lo, target = _bounds(info, request)
    return _longest(hearth_profile(info), Search(request), (type_k, type_v), lo, target)


def plan_hearth(info: ModelInfo, request: PlanRequest) -> Plan:
    reason = hearth_unavailable(info, request)
    if reason:
        return Plan.impossible(f"The Hearth engine cannot run this model here: {reason}.")
    profile = hearth_profile(info)
    search = Search(request)
    lo, target = _bounds(info, request)
    candidates = []
    for pair in auto_pairs(profile, request.n_parallel, request.hearth_pairs_left_out):
        n_ctx = _longest(profile, search, pair, lo, target)
        if n_ctx:
            est = _estimate(profile, search, pair, n_ctx)
            candidates.append(_Candidate(pair, n_ctx, est, kv_cost(HEARTH, *pair) or 0.0))
    if not candidates and profile.config.moe is not None and request.allow_cpu_experts:
        candidates = _with_experts_in_ram(profile, search, lo, target)
    if not candidates:
        return _not_fitting(profile, search, lo)
    best = max(candidates, key=lambda c: _rank(c, target, request.preference))
    return _fitting(profile, search, best, target, candidates)


def _with_experts_in_ram(profile: HearthProfile, search: Search, lo: int, target: int):
    """Per K/V pair Best fit may pick: its longest context and placement with experts in RAM
    (_in_ram)."""
    found = []
    for pair in auto_pairs(profile):
        fitted = _in_ram(profile, search, pair, lo, target)
        if fitted is not None:
            n_ctx, placement = fitted
            est = _estimate(profile, search, pair, n_ctx, placement)
            found.append(_Candidate(pair, n_ctx, est, kv_cost(HEARTH, *pair) or 0.0, placement))
    return found


def _in_ram(profile: HearthProfile, search: Search, pair, lo: int, target: int):
    """(context, placement) for one pair with experts in RAM: the longest context the leanest
    placement fits (every layer's experts read in place, or as many as host memory holds), and
    at that context the fastest of
    the fewest layers read in place, the fewest layers with the most cache slots and, where
    ggml is here, as many layers computed by the CPU (module docstring); None when not even
    the leanest placement fits `lo` tokens."""
    moe, n = profile.config.moe, profile.config.n_layer
    # the leanest placement on the GPU: every layer's experts in RAM, or as many as host memory
    # holds (it grows as they move; a context's KV is all on the GPU). Up to that many layers
    # host memory holds, so there the GPU alone decides and the searches below can bisect.
    leanest = _most_layers_ram_holds(profile, search, pair, lo, n)
    n_ctx = _longest(profile, search, pair, lo, target, (leanest, 0)) if leanest else 0
    if not n_ctx:
        return None

    def fits_with(picks: int):
        def fits(ram: int, slots: int) -> bool:
            placement = (ram, slots, picks)
            return search.shortfall(_estimate(profile, search, pair, n_ctx, placement)) <= 0

        return fits

    fits = fits_with(0)
    bandwidth = search.request.gpus[0].bandwidth_gbps
    in_place = fewest_ram_layers(fits, leanest, 0)
    options = [(in_place, 0)] if in_place is not None else []
    cached = choose_placement(fits, leanest, moe.n_expert, moe.n_expert_used)
    options += [cached] if cached is not None else []
    if OFFLOAD_COSTS.cpu_placements_measured and cpu_experts_available() and in_place is not None:
        # the GPU holds the same as read in place (the layers' experts are off it either way);
        # host memory holds ggml's copy instead, which more layers would only make larger
        k = moe.n_expert_used
        if fits_with(k)(in_place, 0):
            options.append((in_place, 0, k))
        # a split: the same layers, a few MiB of slots more on the GPU, and in host memory the
        # pinned planes, the experts side by side and ggml's copy; the fastest split that fits
        # (predicting is arithmetic, fitting an estimate: the splits tried fastest first)
        if OFFLOAD_COSTS.split_placements_measured:
            by_speed = sorted(range(1, k), key=lambda c: -predicted_speed(
                profile, pair, n_ctx, (in_place, 0), bandwidth, cpu_picks=c
            ).tokens_per_second)  # fmt: skip
            split = next((c for c in by_speed if fits_with(c)(in_place, 0)), None)
            options += [(in_place, 0, split)] if split is not None else []
    if not options:  # cannot happen once the leanest fits; kept for safety
        return None
    return n_ctx, faster_placement(profile, pair, n_ctx, options, bandwidth)


def _most_layers_ram_holds(profile, search: Search, pair, n_ctx: int, n: int) -> int:
    """The most layers (0..n) whose experts, read in place, host memory holds (all n without a
    host budget): host memory grows with each layer moved, so a bisection finds it."""
    host = search.request.host_budget_bytes

    def holds(layers: int) -> bool:
        return (
            host is None or _estimate(profile, search, pair, n_ctx, (layers, 0)).host.total <= host
        )

    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def longest_context_experts_in_ram(
    info: ModelInfo, request: PlanRequest, type_k: str, type_v: str
) -> tuple[int, tuple[int, int]]:
    """For a mixture-of-experts model: the longest context up to the request's target that
    this K/V pair fits on the first GPU with experts in RAM, and (layers in RAM, cache slots
    per such layer[, picks the CPU computes]) there, as plan_hearth plans them when nothing
    fits on the GPU alone;
    (0, ON_GPU) when not even every layer's experts in RAM fit the minimum, or for a dense
    model."""
    profile = hearth_profile(info)
    if profile.config.moe is None:
        return 0, ON_GPU
    lo, target = _bounds(info, request)
    return _in_ram(profile, Search(request), (type_k, type_v), lo, target) or (0, ON_GPU)


def faster_placement(profile, pair, n_ctx: int, options, gpu_bandwidth_gbps) -> tuple:
    """Of (layers in RAM, slots[, cpu picks]) options, the one predicted fastest (the first
    of equals)."""
    return max(
        options,
        key=lambda o: (
            predicted_speed(
                profile, pair, n_ctx, o[:2], gpu_bandwidth_gbps, cpu_picks=cpu_picks_of(o)
            ).tokens_per_second
        ),
    )


def predicted_speed(
    profile: HearthProfile,
    pair: tuple[str, str],
    n_ctx: int,
    experts: tuple[int, int],
    gpu_bandwidth_gbps: float | None,
    costs: OffloadCosts | None = None,
    cpu_picks: int = 0,
) -> OffloadSpeed:
    """The decode speed hearth_offload.offload_speed predicts for this placement (`cpu_picks`
    k: every pick of a layer in RAM computed by the CPU; 0: none), with the KV cache read at
    half the context (a conversation's average)."""
    info, moe = profile.info, profile.config.moe
    tied = info.tensor("output.weight") is None
    # every matrix but the experts and the embedding (one row a token), the output matrix once
    dense = info.weight_bytes - profile.all_expert_bytes - profile.embedding_bytes
    dense += profile.embedding_bytes if tied else 0
    return offload_speed(
        n_layer=profile.config.n_layer,
        n_expert=moe.n_expert,
        n_expert_used=moe.n_expert_used,
        expert_bytes=profile.expert_bytes,
        dense_bytes=dense,
        all_expert_bytes=profile.all_expert_bytes,
        kv_bytes_read=kv_bytes_per_token(profile.config, *pair) * n_ctx / 2,
        ram_layers=experts[0],
        slots=experts[1],
        gpu_bandwidth_gbps=gpu_bandwidth_gbps or UNKNOWN_GPU_BANDWIDTH_GBPS,
        costs=costs or OFFLOAD_COSTS,
        cpu_picks=cpu_picks,
    )


def _rank(c: _Candidate, target: int, preference: str):
    tier = 0 if c.cost <= 0.01 else 1  # f16, q8, K q8 / V rot4 ~ llama.cpp's f16 and q8_0 tier
    if preference == "context":
        return (c.n_ctx, -tier, -c.cost)
    return (min(c.n_ctx, target), -tier, -c.cost)


def choice_of(profile: HearthProfile, pair, n_ctx: int, experts=ON_GPU) -> Choice:
    n = profile.config.n_layer
    moe = profile.config.moe
    return Choice(
        source=profile.info.source,
        quant=profile.info.quant_name or "?",
        n_ctx=n_ctx,
        type_k=pair[0],
        type_v=pair[1],
        flash_attn=False,
        n_gpu_layers=n + 1,
        n_layers=n,
        engine=HEARTH,
        n_cpu_expert_layers=experts[0],
        expert_cache_slots=experts[1],
        n_expert=moe.n_expert if moe is not None else 0,
        expert_cpu_picks=cpu_picks_of(experts),
        n_expert_used=moe.n_expert_used if moe is not None else 0,
    )


def settings_of(
    profile: HearthProfile, request: PlanRequest, pair, n_ctx: int, experts=ON_GPU
) -> LoadSettings:
    return LoadSettings(
        path=profile.info.source,
        n_ctx=n_ctx,
        n_gpu_layers=-1,
        flash_attn="off",  # llama.cpp's setting; the Hearth engine has its own attention
        type_k=pair[0],
        type_v=pair[1],
        n_batch=request.n_batch,
        n_ubatch=min(request.n_ubatch, request.n_batch),
        engine=HEARTH,
        ram_expert_layers=experts[0],
        expert_cache_slots=experts[1],
        expert_cpu_picks=cpu_picks_of(experts),
    )


def kv_text(profile: HearthProfile, pair) -> str:
    per_token = kv_bytes_per_token(profile.config, *pair)
    cost = kv_cost(HEARTH, *pair)
    quality = "quality not measured" if cost is None else f"mean KL {cost:.4f} against f16"
    return f"K {pair[0]} / V {pair[1]} cache: {per_token / 1024:.0f} KiB per token, {quality}"


def experts_in_ram_reasons(
    profile: HearthProfile, pair, n_ctx: int, experts, speed: OffloadSpeed
) -> list[str]:
    """What a plan with experts in RAM says of them, and its predicted speed."""
    moe, n = profile.config.moe, profile.config.n_layer
    picks = cpu_picks_of(experts)
    config = HearthConfig(
        n_ctx, pair[0], pair[1], 512, ram_expert_layers=experts[0],
        expert_cache_slots=experts[1], expert_cpu_picks=picks,
    )  # fmt: skip
    ram = host_expert_bytes(profile, config)
    cache = experts[0] * experts[1] * profile.expert_bytes
    split = 0 < picks < moe.n_expert_used
    pinned = "pinned, twice, and ggml's copy" if split else "ggml's copy" if picks else "pinned"
    if picks:
        how = cpu_share_text(picks, moe.n_expert_used)
        moved = "copied over PCIe" if split else "read over PCIe"
        routing = ""
    elif experts[1]:
        how = (
            f"each of those layers caches {experts[1]} of its {moe.n_expert} experts on the "
            f"GPU ({gib(cache)} in all), least recently used out"
        )
        moved = "copied over PCIe"
        routing = " if the router picks experts evenly (fewer when it favours some)"
    else:
        how = "the GPU reads the experts a token picks there, over PCIe, in place"
        moved = "read over PCIe"
        routing = ""
    return [
        f"Experts in RAM: the routed experts of the last {experts[0]} of {n} layers stay in "
        f"system RAM ({gib(ram)}, {pinned}); {how}. Attention, the router, shared weights and "
        "the other layers' experts stay on the GPU.",
        f"Predicted decode {speed.tokens_per_second:.0f} tokens/s (a prediction, not "
        f"measured): about {speed.misses_per_token:.0f} experts "
        f"({speed.link_bytes_per_token / 2**20:.0f} MiB) a token {moved} at "
        f"{OFFLOAD_COSTS.host_link_gbps:g} GB/s{routing}, "
        f"{speed.gpu_bytes_per_token / 2**30:.2f} GiB a token read on the GPU.",
    ]


def _fitting(profile, search: Search, best: _Candidate, target: int, candidates) -> Plan:
    info, n = profile.info, profile.config.n_layer
    gpu = search.request.gpus[0]
    where = (
        f"all {n} layers, the output and the token embedding on {gpu.name}"
        if best.experts == ON_GPU
        else f"all {n} layers on {gpu.name}, the experts of {best.experts[0]} in system RAM"
    )
    reasons = [
        f"{info.quant_name or '?'} ({gib(info.weight_bytes)} of weights) on the Hearth engine: "
        f"{where}.",
        f"Context {best.n_ctx} tokens"
        + (" (the target)." if best.n_ctx >= target else f" (target {target})."),
        kv_text(profile, best.pair) + ".",
    ]
    speed = None
    if best.experts != ON_GPU:
        picks = cpu_picks_of(best.experts)
        speed = predicted_speed(
            profile, best.pair, best.n_ctx, best.experts[:2], gpu.bandwidth_gbps, cpu_picks=picks
        )
        reasons += experts_in_ram_reasons(profile, best.pair, best.n_ctx, best.experts, speed)
    if not HEARTH_COSTS.calibrated:
        reasons.append(
            "The Hearth engine's memory model has not been checked on a GPU yet "
            "(benchmarks/hearth_memory.py): its workspace and CUDA context are estimates."
        )
    alternatives = [
        Alternative(
            "longer_context",
            f"K {c.pair[0]} / V {c.pair[1]} would fit {c.n_ctx} tokens (mean KL {c.cost:.4f})",
            choice_of(profile, c.pair, c.n_ctx, c.experts),
        )
        for c in candidates
        if c.n_ctx > best.n_ctx
    ]
    return Plan(
        status=FITS,
        confidence=HIGH if HEARTH_COSTS.calibrated else LOW,
        choice=choice_of(profile, best.pair, best.n_ctx, best.experts),
        settings=settings_of(profile, search.request, best.pair, best.n_ctx, best.experts),
        devices=usage_of(search, best.estimate),
        # all on the GPU: no measured figure to predict from yet (engine_table); with experts
        # in RAM the link dominates and hearth_offload predicts it
        tokens_per_second=None if speed is None else speed.tokens_per_second,
        reasons=tuple(reasons),
        alternatives=tuple(alternatives),
    )


def _not_fitting(profile, search: Search, lo: int) -> Plan:
    pairs = auto_pairs(profile, search.request.n_parallel) or [("f16", "f16")]
    leanest = min(pairs, key=lambda p: kv_bytes_per_token(profile.config, *p))
    est = _estimate(profile, search, leanest, lo)
    over = ", ".join(f"{gib(b)} more on {name}" for name, b in search.over_budget(est))
    return Plan(
        status=DOES_NOT_FIT,
        confidence=LOW,
        choice=None,
        settings=None,
        devices=usage_of(search, est),
        tokens_per_second=None,
        reasons=(
            f"On the Hearth engine, even {lo} tokens with the K {leanest[0]} / V {leanest[1]} "
            f"cache need {over}: "
            + (
                "it keeps every layer's attention and a cache of experts on the GPU."
                if profile.config.moe is not None
                else "it keeps every layer on the GPU."
            ),
        ),
        alternatives=(
            Alternative("cpu_offload", "llama.cpp, which can keep part of the model in system RAM"),
        ),
    )
