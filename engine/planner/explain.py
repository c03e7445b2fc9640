"""Turn the search's result into a Plan: the choice, its settings, the per-device breakdown, the
reasons in words, and the nearest options (what a better or a fitting choice would need)."""

from __future__ import annotations

import dataclasses

from engine.planner.kv_cache import CTX_PAD
from engine.planner.memory import Config, MemoryEstimate
from engine.planner.profile import ModelProfile
from engine.planner.records import (
    DOES_NOT_FIT,
    FITS,
    HIGH,
    LOW,
    Alternative,
    Choice,
    DeviceUsage,
    Plan,
    min_tokens_per_second,
)
from engine.planner.remote_link import rpc_servers
from engine.planner.search import Candidate, Search, rank_key
from engine.planner.settings import LoadSettings, expert_override_pattern
from engine.units import format_bytes

GIB = 1024**3


def gib(n: int) -> str:
    return format_bytes(n, 2, "GiB")


def choice_of(profile: ModelProfile, config: Config) -> Choice:
    return Choice(
        source=profile.source,
        quant=profile.quant,
        n_ctx=config.n_ctx,
        type_k=config.type_k,
        type_v=config.type_v,
        flash_attn=config.flash_attn,
        n_gpu_layers=config.n_gpu_layers,
        n_layers=profile.n_layer,
        n_cpu_expert_layers=config.n_cpu_expert_layers if profile.is_moe else 0,
        gpu_layer_counts=config.gpu_layer_counts,
    )


def settings_of(search: Search, profile: ModelProfile, config: Config) -> LoadSettings:
    n = profile.n_layer
    overrides: tuple[tuple[str, str], ...] = ()
    if profile.is_moe and config.n_cpu_expert_layers and config.n_gpu_layers > 1:
        first_gpu_layer = n + 1 - config.n_gpu_layers
        layers = range(max(n - config.n_cpu_expert_layers, first_gpu_layer), n)
        if layers:
            overrides = ((expert_override_pattern(tuple(layers)), "CPU"),)
    split = tuple(float(c) for c in config.gpu_layer_counts) if len(search.gpus) > 1 else ()
    return LoadSettings(
        path=profile.source,
        n_ctx=config.n_ctx,
        n_gpu_layers=config.n_gpu_layers,
        flash_attn="on" if config.flash_attn else "off",
        type_k=config.type_k,
        type_v=config.type_v,
        n_batch=search.request.n_batch,
        n_ubatch=config.n_ubatch,
        tensor_split=split,
        tensor_buft_overrides=overrides,
        swa_full=config.swa_full,
        n_outputs_max=config.n_outputs_max,
        rpc_servers=rpc_servers(search.request),
    )


def usage_of(search: Search, est: MemoryEstimate) -> tuple[DeviceUsage, ...]:
    out = [
        DeviceUsage(g.id, g.name, g.budget_bytes, m.weights, m.kv, m.compute, m.overhead)
        for g, m in zip(search.request.gpus, est.gpus, strict=True)
    ]
    h = est.host
    out.append(
        DeviceUsage(
            "host", "system RAM", search.request.host_budget_bytes, h.weights, h.kv, h.compute,
            h.overhead,
        )
    )  # fmt: skip
    return tuple(out)


def confidence_of(profile: ModelProfile) -> str:
    return HIGH if profile.known_architecture else LOW


def build_plan(search: Search, profiles: list[ModelProfile]) -> Plan:
    if search.candidates:
        key = rank_key(search.request, search.target_ctx)
        best = max(search.candidates, key=key)
        return _fitting(search, profiles, best)
    return _not_fitting(search, profiles)


# -- a plan that fits ----------------------------------------------------------------------------


def _fitting(search: Search, profiles: list[ModelProfile], best: Candidate) -> Plan:
    profile, config = best.profile, best.config
    return Plan(
        status=FITS,
        confidence=confidence_of(profile),
        choice=choice_of(profile, config),
        settings=settings_of(search, profile, config),
        devices=usage_of(search, best.estimate),
        tokens_per_second=best.tokens_per_second,
        reasons=tuple(_reasons(search, best)),
        alternatives=tuple(_better_options(search, profiles, best)),
        notes=profile.notes,
    )


def _reasons(search: Search, best: Candidate) -> list[str]:
    profile, config, req = best.profile, best.config, search.request
    target = search.target_ctx(profile)
    weights = gib(profile.info.weight_bytes)
    out = [f"{profile.quant} ({weights} of weights), preference {req.preference}."]
    n = profile.n_layer
    if not search.gpus:
        out.append("No GPU: everything runs from system RAM.")
    elif config.n_gpu_layers >= n + 1 and not config.n_cpu_expert_layers:
        out.append(f"All {n} layers and the output layer on the GPU.")
    elif config.n_gpu_layers >= n + 1:
        out.append(
            f"All layers on the GPU, but the MoE experts of {config.n_cpu_expert_layers} layers "
            "stay in RAM (llama.cpp runs them on the CPU)."
        )
    else:
        out.append(
            f"{config.n_gpu_layers} of {n + 1} layers on the GPU; the other "
            f"{n + 1 - config.n_gpu_layers} run from RAM, which is slower."
        )
    ctx_text = f"Context {config.n_ctx} tokens"
    ctx_text += " (the target)." if config.n_ctx >= target else f" (target {target})."
    out.append(ctx_text)
    if config.type_k != "f16":
        share = "about half" if config.type_k == "q8_0" else "about a quarter of"
        out.append(f"{config.type_k} KV cache: {share} the memory of f16, to fit more context.")
    out.append(
        "Flash attention on." if config.flash_attn else "Flash attention off (not supported here)."
    )
    if profile.swa_window and not config.swa_full:
        out.append(
            f"Sliding-window layers keep only the last {profile.swa_window} tokens "
            "(+ one batch) in their cache."
        )
    floor = min_tokens_per_second(req)
    if best.tokens_per_second < floor:
        out.append(
            f"Predicted {best.tokens_per_second:.1f} tokens/s is below the wished "
            f"{floor:.0f}; nothing faster fits."
        )
    return out


def _better_options(search: Search, profiles, best: Candidate) -> list[Alternative]:
    profile, config = best.profile, best.config
    out: list[Alternative] = []
    target = search.target_ctx(profile)
    full = profile.n_layer + 1

    def need(p: ModelProfile, c: Config) -> int:
        return max(0, search.shortfall(search.estimate(p, c)))

    for other in profiles:
        if other is profile or other.bits_per_weight <= profile.bits_per_weight:
            continue
        lean = dataclasses.replace(
            config, n_ctx=search.min_ctx(other), n_gpu_layers=other.n_layer + 1
        )
        short = need(other, dataclasses.replace(lean, gpu_layer_counts=()))
        if short:
            out.append(
                Alternative(
                    "larger_quant",
                    f"{other.quant} needs {gib(short)} more memory",
                    choice_of(other, lean),
                    short,
                )
            )
    if config.n_ctx < target:
        wanted = dataclasses.replace(config, n_ctx=target)
        out.append(
            Alternative(
                "longer_context",
                f"{target} tokens of context would need {gib(need(profile, wanted))} more",
                choice_of(profile, wanted),
                need(profile, wanted),
            )
        )
    if config.type_k != "f16":
        f16 = dataclasses.replace(config, type_k="f16", type_v="f16")
        out.append(
            Alternative(
                "larger_kv",
                f"an f16 KV cache would need {gib(need(profile, f16))} more",
                choice_of(profile, f16),
                need(profile, f16),
            )
        )
    if search.gpus and (config.n_gpu_layers < full or config.n_cpu_expert_layers):
        everything = dataclasses.replace(
            config, n_gpu_layers=full, n_cpu_expert_layers=0, gpu_layer_counts=()
        )
        out.append(
            Alternative(
                "all_on_gpu",
                f"everything on the GPU would need {gib(need(profile, everything))} more",
                choice_of(profile, everything),
                need(profile, everything),
            )
        )
    return out


# -- a plan that does not fit ----------------------------------------------------------------------


def _not_fitting(search: Search, profiles: list[ModelProfile]) -> Plan:
    if not search.misses:
        return Plan.impossible(
            "No combination of the allowed KV types and flash-attention settings "
            "works for this model on these devices."
        )
    nearest = min(search.misses, key=lambda m: m.shortfall)
    profile, config = nearest.profile, nearest.config
    over = ", ".join(f"{gib(n)} more on {name}" for name, n in search.over_budget(nearest.estimate))
    where = choice_of(profile, config).offload_summary if search.gpus else "all on the CPU"
    reasons = [
        f"Even the leanest placement ({where}, {config.n_ctx} tokens, {config.type_k} KV cache, "
        f"{profile.quant}) needs {over}."
    ]
    alternatives = [
        Alternative(
            "more_memory",
            f"{gib(nearest.shortfall)} more free memory",
            choice_of(profile, config),
            nearest.shortfall,
        )
    ]
    shorter = _shorter_context(search, nearest)
    if shorter is not None:
        alternatives.append(shorter)
    smaller = _smaller_quant(search, nearest, profiles)
    if smaller is not None:
        alternatives.append(smaller)
    return Plan(
        status=DOES_NOT_FIT,
        confidence=confidence_of(profile),
        choice=None,
        settings=None,
        devices=usage_of(search, nearest.estimate),
        tokens_per_second=None,
        reasons=tuple(reasons),
        alternatives=tuple(alternatives),
        notes=profile.notes,
    )


def _shorter_context(search: Search, miss) -> Alternative | None:
    """The longest context below the minimum that the nearest miss's placement allows."""
    profile, config = miss.profile, miss.config
    combo = (config.type_k, config.type_v, config.flash_attn)
    level = (config.n_gpu_layers, config.n_cpu_expert_layers)
    if config.n_ctx <= CTX_PAD or not search.fits(
        profile, search.config(profile, combo, level, CTX_PAD)
    ):
        return None
    n_ctx = search.longest(profile, combo, level, CTX_PAD, config.n_ctx - CTX_PAD)
    choice = choice_of(profile, search.config(profile, combo, level, n_ctx))
    return Alternative("shorter_context", f"a context of {n_ctx} tokens", choice)


SMALLER_QUANT = ("Q4_K_M", 4.85)  # the usual next step down, and its bits per weight


def _smaller_quant(search: Search, miss, profiles: list[ModelProfile]) -> Alternative | None:
    """Would a Q4_K_M file of this model fit, at the nearest miss's placement? An estimate:
    weights scaled by bits per weight (the planner needs the real file's header to be sure)."""
    name, bits = SMALLER_QUANT
    profile = miss.profile
    if any(p.bits_per_weight <= bits + 0.3 for p in profiles):
        return None  # a file that small was among the candidates already
    scale = bits / profile.bits_per_weight
    est = miss.estimate
    devices = list(zip(est.gpus, (g.budget_bytes for g in search.request.gpus), strict=True))
    devices.append((est.host, search.request.host_budget_bytes))
    for mem, budget in devices:
        if budget is not None and mem.total - int(mem.weights * (1 - scale)) > budget:
            return None
    size = gib(int(profile.info.weight_bytes * scale))
    return Alternative("smaller_quant", f"a {name} file of this model (about {size})")


def with_cpu_offload_alternative(plan: Plan, relaxed: Plan) -> Plan:
    """`plan` (which does not fit) with "keep part of the model in RAM" offered, when the same
    request with CPU offload allowed (`relaxed`) fits."""
    if not relaxed.fits or relaxed.choice is None:
        return plan
    offload = Alternative(
        "cpu_offload",
        f"keeping part of the model in RAM: {relaxed.choice.offload_summary}",
        relaxed.choice,
    )
    return dataclasses.replace(plan, alternatives=(*plan.alternatives, offload))
