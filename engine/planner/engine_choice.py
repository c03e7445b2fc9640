"""Which engine runs a model: llama.cpp's plan, the Hearth engine's plan, and the choice between
them, with its reason in words.

    plan_engines(planner, request, engine="auto")   -> Plan (choice.engine says which)

"llama" and "hearth" plan for that engine alone. "auto" (Best fit) takes the Hearth engine only
where the measured figures say it is at least as fast as llama.cpp on this GPU class
(engine_table.speed_verdict; a mixture-of-experts model by MoE models' figures only) and its
K/V cache is at least as good as the one llama.cpp's plan uses (measured mean KL), or where
llama.cpp cannot fit the model at all. Otherwise llama.cpp runs it, and the plan's notes say
why the Hearth engine was not chosen, so a slower or lossier engine is never picked in silence.
"""

from __future__ import annotations

import dataclasses

from engine.enums import Engine
from engine.planner.engine_table import (
    HEARTH,
    LLAMA,
    device_class,
    kv_cost,
    speed_verdict,
)
from engine.planner.hearth_plan import hearth_profile, hearth_unavailable, plan_hearth
from engine.planner.planner import Planner
from engine.planner.records import Plan, PlanRequest

ENGINES = ("auto", LLAMA, HEARTH)


def plan_engines(
    planner: Planner, request: PlanRequest, engine: str = "auto", llama: Plan | None = None
) -> Plan:
    """`llama`: llama.cpp's plan when the caller has made it (across helper machines, say);
    else planner.plan(request)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    info = planner.profiles[0].info
    if engine == HEARTH:
        return plan_hearth(info, request)
    llama = llama if llama is not None else planner.plan(request)
    if engine == LLAMA:
        return llama
    unavailable = hearth_unavailable(info, request)
    if unavailable:
        return _with_note(llama, f"Engine: llama.cpp (the Hearth engine cannot run it here: "
                                 f"{unavailable}).")  # fmt: skip
    hearth = plan_hearth(info, request)
    gpu = request.gpus[0]
    moe = hearth_profile(info).config.moe is not None
    in_ram = hearth.choice is not None and hearth.choice.n_cpu_expert_layers > 0
    verdict = speed_verdict(
        device_class(gpu.backend, gpu.compute_capability),
        moe=moe,
        experts_in_ram=in_ram,
        clients=request.n_parallel,
    )
    if not llama.fits and hearth.fits:
        speed = "" if verdict.hearth_faster else f"; note that {verdict.text}"
        hearth_name = Engine.HEARTH.display_name
        return _with_note(hearth, f"Engine: {hearth_name}, since llama.cpp cannot fit the "
                                  f"model on these devices{speed}.")  # fmt: skip
    if not hearth.fits or hearth.choice is None or llama.choice is None:
        return _with_note(llama, "Engine: llama.cpp (the Hearth engine does not fit it here).")
    if in_ram and llama.choice.n_cpu_expert_layers == 0:
        return _experts_in_ram_against_none(hearth, llama)
    if not verdict.hearth_faster:
        longer = hearth.choice.n_ctx > llama.choice.n_ctx
        extra = (
            f" It would fit {hearth.choice.n_ctx:,} tokens with a K {hearth.choice.type_k} / "
            f"V {hearth.choice.type_v} cache; choose it on the Model page to try it."
            if longer
            else ""
        )
        return _with_note(
            llama, f"Engine: llama.cpp, because {verdict.text}.{extra}{_predictions(hearth, llama)}"
        )
    ours = kv_cost(HEARTH, hearth.choice.type_k, hearth.choice.type_v)
    theirs = kv_cost(LLAMA, llama.choice.type_k, llama.choice.type_v)
    if ours is None or theirs is None or ours > theirs:
        return _with_note(
            llama,
            f"Engine: llama.cpp: {verdict.text}, but its plan here needs a K "
            f"{hearth.choice.type_k} / V {hearth.choice.type_v} cache, which loses more than "
            f"llama.cpp's {llama.choice.type_k} (mean KL {_kl(ours)} against {_kl(theirs)}).",
        )
    if hearth.choice.n_ctx < min(llama.choice.n_ctx, _target(request, llama)):
        return _with_note(
            llama,
            f"Engine: llama.cpp: {verdict.text}, but it fits only {hearth.choice.n_ctx:,} "
            f"tokens here against llama.cpp's {llama.choice.n_ctx:,}.",
        )
    return _with_note(hearth, f"Engine: {Engine.HEARTH.display_name}: {verdict.text}.")


def _experts_in_ram_against_none(hearth: Plan, llama: Plan) -> Plan:
    """The Hearth engine's plan keeps experts in RAM where llama.cpp's holds every expert on
    the GPU (the Hearth engine's runtime takes more of the card): the measured experts-in-RAM
    figures compare the two engines both with experts in RAM, so they do not say which is
    faster here. The planner's predictions decide, and llama.cpp keeps ties and unknowns."""
    layers = hearth.choice.n_cpu_expert_layers
    ours, theirs = hearth.tokens_per_second, llama.tokens_per_second
    known = ours is not None and theirs is not None
    why = (
        f"llama.cpp holds every expert on the GPU here, where the Hearth engine would keep "
        f"{layers} layer{'s' if layers != 1 else ''}' experts in RAM"
    )
    predicted = f" (predicted {ours:.0f} tokens/s against {theirs:.0f})" if known else ""
    if known and ours > theirs:
        return _with_note(
            hearth, f"Engine: {Engine.HEARTH.display_name}: {why}, and it is still predicted "
                    f"faster{predicted}.",
        )  # fmt: skip
    return _with_note(llama, f"Engine: llama.cpp: {why}{predicted}.")


def _predictions(hearth: Plan, llama: Plan) -> str:
    """Both plans' predicted decode speeds, where the Hearth plan keeps experts in RAM (its
    prediction is then a bandwidth model's, as llama.cpp's is): what the choice gives up or
    gains in the planner's estimate, until measured figures decide."""
    if hearth.choice is None or not hearth.choice.n_cpu_expert_layers:
        return ""
    if hearth.tokens_per_second is None or llama.tokens_per_second is None:
        return ""
    return (
        f" Predicted, not measured: {hearth.tokens_per_second:.0f} tokens/s on the Hearth "
        f"engine with {hearth.choice.experts_in_ram_text}, {llama.tokens_per_second:.0f} on "
        f"llama.cpp ({llama.choice.offload_summary if llama.choice else 'its plan'})."
    )


def _target(request: PlanRequest, llama: Plan) -> int:
    return request.target_ctx or (llama.choice.n_ctx if llama.choice else 0)


def _kl(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.4f}"


def _with_note(plan: Plan, note: str) -> Plan:
    return dataclasses.replace(plan, notes=(note, *plan.notes))


def engine_name(engine: str) -> str:
    return Engine(engine).display_name if engine in tuple(Engine) else engine
