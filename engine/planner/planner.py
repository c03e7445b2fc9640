"""The planner's entry points: a pure function from model headers, devices and a request to a Plan.

    plan(model_infos, request) -> Plan
    Planner(model_infos).plan(request)          # keeps the per-file tables for live sliders
    request_for_devices(devices, ...) -> PlanRequest

A model that cannot fit gets a Plan whose status says so, with the nearest options; a file the
planner cannot make sense of gets a DOES_NOT_FIT plan with the reason. Only a malformed request
(an unknown preference, say) raises ValueError: that is a programming error, not user input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine.enums import KV_TYPES
from engine.gguf import ModelInfo
from engine.planner.backends import BACKENDS
from engine.planner.explain import build_plan, with_cpu_offload_alternative
from engine.planner.profile import ModelProfile
from engine.planner.profile_dims import build_profile
from engine.planner.records import PREFERENCES, DeviceBudget, Plan, PlanRequest
from engine.planner.search import Search
from engine.planner.tables import warm_tables

MIB = 1024 * 1024
MIN_MARGIN_BYTES = 384 * MIB
MARGIN_FRACTION = 0.04


def safety_margin(total_bytes: int | None) -> int:
    """Memory left unplanned on a GPU: for other programs' growth and what the model cannot
    foresee. 4% of the card, at least 384 MiB."""
    return max(MIN_MARGIN_BYTES, int(MARGIN_FRACTION * (total_bytes or 0)))


def _check(request: PlanRequest) -> None:
    if request.preference not in PREFERENCES:
        raise ValueError(f"preference must be one of {PREFERENCES}, not {request.preference!r}")
    if request.flash_attn not in ("on", "off", "auto"):
        raise ValueError(f"flash_attn must be on, off or auto, not {request.flash_attn!r}")
    unknown = set(request.kv_types) - set(KV_TYPES)
    if unknown:
        raise ValueError(f"unknown KV types {sorted(unknown)}; use {KV_TYPES}")
    if request.n_ubatch <= 0 or request.n_batch <= 0:
        raise ValueError("n_batch and n_ubatch must be positive")


def _usable(profile: ModelProfile) -> bool:
    return profile.n_layer > 0 and profile.n_embd > 0 and profile.n_vocab > 0


def plan_profiles(profiles: Sequence[ModelProfile], request: PlanRequest) -> Plan:
    _check(request)
    usable = [p for p in profiles if _usable(p)]
    if not usable:
        names = ", ".join(p.source for p in profiles) or "no file"
        return Plan.impossible(
            f"{names}: the header lacks the layer count, embedding size or vocabulary, "
            "so no memory estimate is possible."
        )
    search = Search(request)
    search.run(usable)
    plan = build_plan(search, list(usable))
    if plan.fits or not search.gpus or (request.allow_cpu_layers and request.allow_cpu_experts):
        return plan
    relaxed = dataclasses.replace(request, allow_cpu_layers=True, allow_cpu_experts=True)
    return with_cpu_offload_alternative(plan, plan_profiles(usable, relaxed))


class Planner:
    """Plans for a fixed set of candidate files; building the per-file tables once makes each
    later plan cheap (a GUI slider can call plan() on every move)."""

    def __init__(self, models: ModelInfo | Sequence[ModelInfo], backends=("cuda", "cpu")) -> None:
        infos = [models] if isinstance(models, ModelInfo) else list(models)
        self.profiles = [build_profile(info) for info in infos]
        for profile in self.profiles:  # the per-backend tables, once, before the first plan
            if _usable(profile):
                warm_tables(profile, [BACKENDS[name] for name in backends if name in BACKENDS])

    def plan(self, request: PlanRequest) -> Plan:
        return plan_profiles(self.profiles, request)


def plan(models: ModelInfo | Sequence[ModelInfo], request: PlanRequest) -> Plan:
    return Planner(models).plan(request)


def request_for_devices(
    devices: Sequence,
    *,
    vram_bytes: int | None = None,
    margin_bytes: int | None = None,
    vram_budget_bytes: int | None = None,
    **options,
) -> PlanRequest:
    """A PlanRequest for detected devices (engine.hardware.Device): each GPU's budget is its
    free memory (or `vram_bytes`, to plan for another card) minus the safety margin, or
    `vram_budget_bytes` as it is (a budget the person chose, at most the card's total); host RAM
    is the CPU device's free memory."""
    gpus: list[DeviceBudget] = []
    host_budget = None
    host_bandwidth = None
    unified = False
    for device in devices:
        if not device.is_gpu:
            host_budget = device.free_bytes
            host_bandwidth = device.memory_bandwidth_gbps
            continue
        unified = unified or device.unified_memory
        free = vram_bytes if vram_bytes is not None else device.free_bytes
        if vram_bytes is None and device.gpu_memory_limit_bytes is not None and free is not None:
            free = min(free, device.gpu_memory_limit_bytes)  # Metal's working-set limit
        if free is None:
            continue
        margin = margin_bytes if margin_bytes is not None else safety_margin(device.total_bytes)
        budget = max(0, free - margin)
        if vram_budget_bytes is not None:
            budget = max(0, min(vram_budget_bytes, device.total_bytes or vram_budget_bytes))
        backend = next((b for b in device.backends if b != "cpu"), "cuda")
        gpus.append(
            DeviceBudget(
                id=device.id,
                name=device.name,
                backend=backend,
                budget_bytes=budget,
                bandwidth_gbps=device.memory_bandwidth_gbps,
                compute_capability=device.compute_capability,
            )
        )
    # with unified memory the GPU's budget already is the host's free memory: checking both
    # would count it twice
    options.setdefault("host_budget_bytes", None if unified else host_budget)
    options.setdefault("host_bandwidth_gbps", host_bandwidth)
    return PlanRequest(gpus=tuple(gpus), **options)
