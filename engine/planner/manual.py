"""Memory for settings a person chose (the settings panel's sliders), rather than searched for.

    planner = Planner(read_model_info(path))
    result = plan_manual(planner, request, ManualChoice(n_ctx=8192, kv_type="q8_0", ...))
    result.devices      # weights / KV / compute / overhead per GPU, then "host"
    result.over_budget  # (device name, bytes over) for each device it does not fit
    result.settings     # LoadSettings for the engine, whether or not it fits

GPU layers "auto" (n_gpu_layers=None) offloads as many layers as fit the GPUs' budgets with the
other choices fixed: memory grows with every layer offloaded, so a bisection finds the most.
One estimate is a few table look-ups once Planner has built its tables, so a slider can call
this on every move.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.planner.explain import settings_of, usage_of
from engine.planner.hearth_memory import HearthConfig, hearth_estimate
from engine.planner.hearth_offload import most_slots
from engine.planner.hearth_plan import faster_placement, hearth_profile
from engine.planner.hearth_plan import settings_of as hearth_settings
from engine.planner.memory import Config, DeviceMemory, MemoryEstimate
from engine.planner.planner import Planner
from engine.planner.profile import ModelProfile
from engine.planner.records import DeviceUsage, PlanRequest
from engine.planner.search import Search
from engine.planner.settings import LoadSettings


@dataclass(frozen=True)
class ManualChoice:
    n_ctx: int
    kv_type: str = "f16"  # K and V alike
    flash_attn: bool = True
    n_gpu_layers: int | None = None  # None: as many as fit; llama.cpp's count (output is one)
    n_cpu_expert_layers: int = 0  # MoE: the last N layers keep their experts in RAM
    type_v: str | None = None  # None: as kv_type (K)
    engine: str = "llama"  # "hearth": engine/planner/hearth_plan.py plans it
    # the Hearth engine with experts in RAM: experts cached on the GPU per such layer (0: read
    # in place over the bus); None: the faster (predicted) of in place and as many as fit
    expert_cache_slots: int | None = None


@dataclass(frozen=True)
class ManualPlan:
    choice: ManualChoice
    config: Config
    devices: tuple[DeviceUsage, ...]
    over_budget: tuple[tuple[str, int], ...]
    settings: LoadSettings
    n_layers: int  # repeating layers; n_gpu_layers runs to n_layers + 1

    @property
    def fits(self) -> bool:
        return not self.over_budget


def _config(
    profile: ModelProfile, choice: ManualChoice, n_gpu_layers: int, lean_outputs: bool = True
) -> Config:
    # V cache types other than f16 need flash attention in llama.cpp.
    type_v = (choice.type_v or choice.kv_type) if choice.flash_attn else "f16"
    return Config(
        n_ctx=choice.n_ctx,
        type_k=choice.kv_type,
        type_v=type_v,
        flash_attn=choice.flash_attn,
        n_gpu_layers=n_gpu_layers,
        n_cpu_expert_layers=choice.n_cpu_expert_layers if profile.is_moe else 0,
        # The worker reserves logits for one output per batch (PlanRequest.lean_outputs).
        n_outputs_max=1 if lean_outputs else 0,
    )


def most_gpu_layers(search: Search, profile: ModelProfile, choice: ManualChoice) -> int:
    """The most layers (output layer included) that fit the GPUs with `choice`'s other values."""
    if not search.gpus:
        return 0
    lo, hi = 0, profile.n_layer + 1
    if search.fits(profile, _config(profile, choice, hi, search.request.lean_outputs), "gpus"):
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if search.fits(profile, _config(profile, choice, mid, search.request.lean_outputs), "gpus"):
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan_manual(planner: Planner, request: PlanRequest, choice: ManualChoice) -> ManualPlan:
    profile = planner.profiles[0]
    if choice.engine == "hearth":
        return _plan_hearth(profile, request, choice)
    search = Search(request)
    if choice.n_gpu_layers is None:
        n_gpu_layers = most_gpu_layers(search, profile, choice)
    else:
        n_gpu_layers = max(0, min(choice.n_gpu_layers, profile.n_layer + 1))
    if not search.gpus:
        n_gpu_layers = 0
    config = _config(profile, choice, n_gpu_layers, request.lean_outputs)
    estimate = search.estimate(profile, config)
    return ManualPlan(
        choice=choice,
        config=config,
        devices=usage_of(search, estimate),
        over_budget=tuple(search.over_budget(estimate)),
        settings=settings_of(search, profile, config),
        n_layers=profile.n_layer,
    )


def _plan_hearth(profile: ModelProfile, request: PlanRequest, choice: ManualChoice) -> ManualPlan:
    """The Hearth engine's memory for this choice: the whole model on the first GPU, or, with
    no GPU, on the CPU (HEARTH_ENGINE_DEVICE=cpu), where TorchOps keeps every matrix it uses
    dequantized to float32 (engine/hearth/ops.py) beside the mapped file's embedding."""
    hearth = hearth_profile(profile.info)
    search = Search(request)
    type_k, type_v = choice.kv_type, choice.type_v or choice.kv_type
    experts = _hearth_experts(hearth, search, choice) if search.gpus else (0, 0)
    ubatch = min(request.n_ubatch, choice.n_ctx)
    config = HearthConfig(
        choice.n_ctx, type_k, type_v, ubatch, request.n_parallel,
        ram_expert_layers=experts[0], expert_cache_slots=experts[1],
    )  # fmt: skip
    est = hearth_estimate(hearth, config, max(1, len(search.gpus)))
    if not search.gpus:
        g, h = est.gpus[0], est.host
        on_cpu = DeviceMemory(4 * hearth.values_on_gpu + h.weights, g.kv, g.compute, h.overhead)
        est = MemoryEstimate((), on_cpu, (), 0)
    n = hearth.config.n_layer
    return ManualPlan(
        choice=choice,
        config=Config(
            n_ctx=choice.n_ctx,
            type_k=type_k,
            type_v=type_v,
            flash_attn=False,
            n_gpu_layers=n + 1 if search.gpus else 0,
            n_cpu_expert_layers=experts[0],
        ),
        devices=usage_of(search, est),
        over_budget=tuple(search.over_budget(est)),
        settings=hearth_settings(hearth, request, (type_k, type_v), choice.n_ctx, experts),
        n_layers=n,
    )


def _hearth_experts(hearth, search: Search, choice: ManualChoice) -> tuple[int, int]:
    """(layers whose experts stay in RAM, cache slots per such layer) for the Hearth engine:
    the choice's layers, with its slots, or the faster (predicted) of reading them in place and
    the most slots that fit (hearth_offload.most_slots)."""
    moe = hearth.config.moe
    ram = min(choice.n_cpu_expert_layers, hearth.config.n_layer) if moe is not None else 0
    if not ram:
        return 0, 0
    lo, top = moe.n_expert_used, max(moe.n_expert_used, moe.n_expert - 1)
    if choice.expert_cache_slots == 0:
        return ram, 0
    if choice.expert_cache_slots is not None:
        return ram, max(lo, min(top, choice.expert_cache_slots))
    pair = (choice.kv_type, choice.type_v or choice.kv_type)
    ubatch = min(search.request.n_ubatch, choice.n_ctx)

    def fits(layers: int, slots: int) -> bool:
        config = HearthConfig(
            choice.n_ctx,
            *pair,
            ubatch,
            search.request.n_parallel,
            ram_expert_layers=layers,
            expert_cache_slots=slots,
        )
        return search.shortfall(hearth_estimate(hearth, config, len(search.gpus))) <= 0

    cached = (ram, most_slots(fits, ram, lo, top) if fits(ram, lo) else lo)
    gbps = search.request.gpus[0].bandwidth_gbps
    return faster_placement(hearth, pair, choice.n_ctx, [(ram, 0), cached], gbps)
