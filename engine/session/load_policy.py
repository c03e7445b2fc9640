"""How a model is loaded: the one policy behind every way of opening a model.

    decision = plan_load(path, snapshot_machine(), RememberedSettings().get(path))
    if decision.fits:
        client.load(decision.params)        # what the planner checked, nothing else
    else:
        print(decision.refusal())           # what it would need, and the nearest that fit

The window (File › Open, drag-and-drop, --model, the Library, reload, start-up), the CLI
(`chat`, `bench`, `plan --load`) and the server all come here, so a model is never loaded with
settings nobody checked. In order:

1. the person's own choice (remembered from the Model page, or given on the command line), if it
   still fits this machine as it is now;
2. else the planner's best fit, aiming at DEFAULT_CONTEXT tokens (the training context if
   shorter), never below MIN_CONTEXT, or with "Use all of my GPU" at the training context with
   every layer on the GPU (engine/planner/fill_gpu.py); a choice that no longer fits is said
   so in `notes`;
3. else nothing is loaded: the decision says what the model would need, and offers other
   quantizations of the same model beside it on disk that do fit.

Pure apart from reading GGUF headers: the machine comes in as a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from engine.enums import KV_TYPES, Engine
from engine.gguf import GGUFError, ModelInfo, read_model_info
from engine.gguf.projector import is_projector_name
from engine.hardware.remote import RemoteHost
from engine.planner import Plan, Planner, PlanRequest
from engine.planner.draft import reserve, speculation_memory
from engine.planner.engine_choice import plan_engines
from engine.planner.fill_gpu import fill_request
from engine.planner.hearth_plan import hearth_unavailable
from engine.planner.manual import ManualPlan, plan_manual
from engine.planner.records import Choice
from engine.planner.remote import plan_with_helpers
from engine.planner.vision import (
    ProjectorCost,
    projector_cost,
    projector_note,
    reserve_projector,
    with_projector,
)
from engine.runtime.protocol import ModelParams, SpeculativeParams
from engine.session.kv_quality import cached as kv_check_results
from engine.session.kv_quality import with_kv_check
from engine.session.machine import MachineSnapshot
from engine.session.model_file import UnusableModelFile, check_model_file
from engine.session.projector_file import find_projector
from engine.session.remembered import RememberedChoice
from engine.units import format_bytes

DEFAULT_CONTEXT = 8192  # a first load: room for a real conversation; the slider goes further
MIN_CONTEXT = 512  # below this a chat model is of no use


class PlanSource(StrEnum):
    CHOSEN = "chosen"  # the person's remembered (or command-line) choice
    BEST_FIT = "best_fit"
    NOTHING_FITS = "nothing_fits"


@dataclass(frozen=True)
class LoadOption:
    """A plan that fits, offered when the model asked for does not."""

    summary: str  # e.g. "Qwen3-8B-Q3_K_M.gguf, 8,192 tokens, all layers on the GPU"
    path: Path
    params: ModelParams


@dataclass(frozen=True)
class LoadDecision:
    path: Path
    info: ModelInfo
    source: PlanSource
    choice: RememberedChoice | None  # what the Model page shows; None when nothing fits
    plan: ManualPlan | None  # memory per device for `choice`
    best: Plan | None  # the planner's search (its reasons and alternatives), when it ran
    params: ModelParams | None  # None: do not load
    notes: tuple[str, ...] = ()  # what the person should know (a choice that no longer fits)
    options: tuple[LoadOption, ...] = ()
    # The person's choice, when it did not fit: (device, bytes over its budget) for each device.
    chosen_over_budget: tuple[tuple[str, int], ...] = ()
    # The vision projector loaded with the model (its memory is in `plan`), for the Model page
    # to plan its sliders' choices with it too.
    projector: ProjectorCost | None = None

    def shortfall_text(self) -> str:
        """ "2.10 GiB more on RTX 4070, 0.50 GiB more on system RAM" for a choice that failed."""
        return ", ".join(
            f"{format_bytes(n, 2)} more on {dev}" for dev, n in self.chosen_over_budget
        )

    @property
    def fits(self) -> bool:
        return self.params is not None

    @property
    def name(self) -> str:
        return self.path.name

    def summary(self) -> str:
        """One line: what will run, e.g. "8,192 tokens · f16 KV · 31/33 layers on the GPU"."""
        if self.plan is None:
            return "does not fit"
        c = self.plan.config
        kv = c.type_k if c.type_k == c.type_v else f"{c.type_k}/{c.type_v}"
        total = self.plan.n_layers + 1
        layers = f"{c.n_gpu_layers}/{total} layers on the GPU" if c.n_gpu_layers else "on the CPU"
        hearth = self.plan.settings.engine == Engine.HEARTH
        engine = f" · {Engine.HEARTH.display_name}" if hearth else ""
        return f"{c.n_ctx:,} tokens · {kv} KV · {layers}{engine}"

    def refusal(self) -> str:
        """Why nothing is loaded, and what would help (a banner's text; the title names the
        file). E.g. "Even the leanest placement (...) needs 4.13 GiB more on system RAM. ..."."""
        parts = list(self.best.reasons) if self.best is not None else []
        more = [
            a.summary
            for a in (self.best.alternatives if self.best is not None else ())
            if a.summary and a.kind != "more_memory"  # the reason says how much already
        ]
        if more:
            parts.append("It would fit with " + "; or ".join(more) + ".")
        if self.options:
            parts.append(
                "Other files of this model that fit: "
                + "; ".join(o.summary for o in self.options)
                + "."
            )
        else:
            parts.append("Free some memory (close other programs) or use a smaller quantization.")
        return " ".join(parts)


def plan_load(
    path: str | Path,
    machine: MachineSnapshot,
    chosen: RememberedChoice | None = None,
    *,
    info: ModelInfo | None = None,
    siblings: Iterable[str | Path] = (),
    target_ctx: int | None = None,
    speculative: SpeculativeParams | None = None,
    n_parallel: int = 1,
    fill_gpu: bool = False,
    projector: str | Path | None = None,
) -> LoadDecision:
    """Decide how to load `path` on `machine`. Raises UnusableModelFile for a file that is not a
    readable GGUF; `info` skips reading the header again when the caller just did.
    `speculative`: what speculative decoding will take (a draft model, MTP's rows and KV, the
    checked logits) is set aside from the budgets first (engine/planner/draft.py).
    `n_parallel`: sequences decoded together (`hearth serve --parallel`), which the Hearth
    engine's memory counts (each sequence's pages, a row per sequence in a decode step).
    `fill_gpu` ("Use all of my GPU"): the best fit fills the GPU with context up to the safety
    margin, every layer on it (engine/planner/fill_gpu.py); a choice of the person's wins.
    A vision projector (`projector`, as the Library remembers it, else an mmproj GGUF beside the
    model: engine/session/projector_file.py) is loaded with the model, its memory set aside
    first the same way (engine/planner/vision.py)."""
    path = Path(path)
    info = info if info is not None else check_model_file(path)
    planner = Planner(info)
    notes: list[str] = []
    speculation = _SpeculationSetAside(info, speculative, notes)
    vision = _VisionSetAside(path, info, projector, bool(machine.plan_request().gpus), notes)

    def set_aside(request, n_ctx, kv_type="f16", flash_attn=True):
        return vision(speculation(request, n_ctx, kv_type, flash_attn))

    chosen_over: tuple[tuple[str, int], ...] = ()
    unavailable = None
    if chosen is not None and chosen.engine == "hearth":
        unavailable = hearth_unavailable(info, machine.plan_request(n_parallel=n_parallel))
    if unavailable:
        notes.append(
            f"Your settings for {path.name} ask for the Hearth engine, which cannot run it here "
            f"({unavailable}), so it loads with llama.cpp's best fit instead."
        )
        chosen = None
    if chosen is not None:
        request = machine.plan_request(
            vram_budget_bytes=chosen.vram_budget_bytes, n_parallel=n_parallel
        )
        request = set_aside(request, chosen.n_ctx, chosen.kv_type, chosen.flash_attn)
        manual = plan_manual(planner, request, chosen.manual_choice)
        if manual.fits:
            decision = _decision(path, info, PlanSource.CHOSEN, chosen, manual, None)
            return vision.applied(replace(decision, notes=tuple(notes)))
        chosen_over = tuple(manual.over_budget)
        over = ", ".join(f"{format_bytes(n, 2)} more on {dev}" for dev, n in chosen_over)
        notes.append(
            f"Your settings for {path.name} ({chosen.n_ctx:,} tokens, {chosen.kv_text} KV) need "
            f"{over} than this machine has free now, so it loads with the best fit instead. "
            "Your settings are kept: free memory and apply them again on the Model page."
        )
    request = set_aside(
        machine.plan_request(n_parallel=n_parallel), _target_context(planner, target_ctx)
    )
    best = best_fit(planner, request, target_ctx, helpers=machine.helpers)
    if fill_gpu:  # the card filled with context, every layer on it (engine/planner/fill_gpu.py)
        filled_request = fill_request(
            machine.plan_request(n_parallel=n_parallel), info.context_length
        )
        filled_request = set_aside(filled_request, filled_request.target_ctx)
        filled = best_fit(planner, filled_request, filled_request.target_ctx,
                          helpers=machine.helpers)  # fmt: skip
        # taken where it is at least the usual context (a card too small for the whole model
        # keeps the usual best fit, with layers in RAM)
        if filled.fits and (not best.fits or filled.choice.n_ctx >= best.choice.n_ctx):
            request, best = filled_request, filled
    if machine.helpers and best.notes:
        notes.append(best.notes[-1])  # whether the helpers are used, and why
    if best.fits and best.choice is not None:
        if best.settings is not None and best.settings.rpc_servers:
            # the devices the best fit placed on
            request = set_aside(
                machine.plan_request(helpers=True, n_parallel=n_parallel), best.choice.n_ctx
            )
        choice = choice_from(best.choice)
        manual = plan_manual(planner, request, choice.manual_choice)
        decision = _decision(path, info, PlanSource.BEST_FIT, choice, manual, best)
        if not manual.fits:  # the search and the manual estimate agree; this guards the seam
            decision = replace(decision, params=best.settings.model_params())
        decision = replace(decision, notes=tuple(notes), chosen_over_budget=chosen_over)
        return vision.applied(decision)
    options = tuple(_options_among(siblings, path, info, machine, target_ctx))
    return LoadDecision(
        path=path,
        info=info,
        source=PlanSource.NOTHING_FITS,
        choice=None,
        plan=None,
        best=best,
        params=None,
        notes=tuple(notes),
        options=options,
        chosen_over_budget=chosen_over,
    )


class _SpeculationSetAside:
    """A plan request less what speculative decoding takes at a context (engine/planner/
    draft.py), said once in the decision's notes; the request itself when it is off."""

    def __init__(self, info: ModelInfo, speculative: SpeculativeParams | None, notes: list):
        self.info, self.notes, self.said = info, notes, False
        # "auto" is off on llama.cpp and, where the Hearth engine turns prompt lookup on, costs
        # its checked logits only (a few MiB): nothing set aside for it
        asked = speculative and speculative.method not in ("off", "auto")
        self.speculative = speculative if asked else None
        self.draft = None
        if self.speculative and self.speculative.method == "draft_model":
            try:
                self.draft = read_model_info(self.speculative.draft_path)
            except (GGUFError, OSError):
                self.draft = None  # the worker refuses it when it loads, saying why

    def __call__(
        self, request: PlanRequest, n_ctx: int, kv_type: str = "f16", flash_attn: bool = True
    ) -> PlanRequest:
        if self.speculative is None:
            return request
        if kv_type not in KV_TYPES:  # a Hearth format: speculation runs on llama.cpp's cache
            kv_type = "f16"
        memory = speculation_memory(self.info, self.speculative, request, n_ctx=n_ctx,
                                    kv_type=kv_type, flash_attn=flash_attn,
                                    draft=self.draft)  # fmt: skip
        if memory is None or memory.total_bytes == 0:
            return request
        if not self.said:
            self.said = True
            self.notes.append(
                f"{format_bytes(memory.total_bytes, 2)} set aside for speculative decoding "
                f"({self.speculative.method.replace('_', ' ')})."
            )
        return reserve(request, memory)


class _VisionSetAside:
    """The model's vision projector, when it has one: its memory taken from the budgets before
    planning, then counted on its device in the decision, its path in the load's parameters
    and a note saying what it takes (of memory, and of the context per image)."""

    def __init__(self, path: Path, info: ModelInfo, chosen, gpus: bool, notes: list):
        found, passed_over = find_projector(path, info, chosen)
        notes.extend(passed_over)
        self.found = found
        self.cost = projector_cost(found.info, on_gpu=gpus) if found else None

    def __call__(self, request: PlanRequest) -> PlanRequest:
        return reserve_projector(request, self.cost) if self.cost else request

    def applied(self, decision: LoadDecision) -> LoadDecision:
        cost, plan, params = self.cost, decision.plan, decision.params
        if cost is None or plan is None or params is None:
            return decision
        cost = replace(cost, on_gpu=cost.on_gpu and params.n_gpu_layers != 0)
        devices = with_projector(plan.devices, cost)
        where = next((d.name for d in devices if d.projector_bytes), "system RAM")
        return replace(
            decision,
            plan=replace(plan, devices=devices),
            params=replace(params, mmproj_path=str(self.found.path)),
            notes=(*decision.notes, projector_note(cost, params.n_ctx, where)),
            projector=cost,
        )


def choice_from(choice: Choice) -> RememberedChoice:
    """The planner's choice as the Model page's controls hold it."""
    all_layers = choice.n_gpu_layers >= choice.n_layers + 1
    return RememberedChoice(
        n_ctx=choice.n_ctx,
        kv_type=choice.type_k,
        flash_attn=choice.flash_attn,
        n_gpu_layers=None if all_layers else choice.n_gpu_layers,
        n_cpu_expert_layers=choice.n_cpu_expert_layers,
        engine=choice.engine,
        type_v=None if choice.type_v == choice.type_k else choice.type_v,
    )


def best_fit(
    planner: Planner,
    request: PlanRequest,
    target_ctx: int | None = None,
    engine: str = "auto",
    helpers: Sequence[RemoteHost] = (),
) -> Plan:
    """The planner's best choice aiming at `target_ctx` (else DEFAULT_CONTEXT, or the training
    context if shorter), never below MIN_CONTEXT, across `helpers` where they help, on the
    engine the measured figures favour (engine/planner/engine_choice.py) unless `engine` names
    one; the K/V types that this model's own KV check found to hurt it are left out."""
    target = _target_context(planner, target_ctx)
    request = replace(request, target_ctx=target, min_ctx=min(MIN_CONTEXT, target))
    # the K/V types this model's own KV check found to hurt it are not chosen (kv_quality.py)
    request = with_kv_check(request, kv_check_results(planner.profiles[0].info.source))
    llama = plan_with_helpers(planner, request, helpers)
    return plan_engines(planner, request, engine, llama=llama)


def _target_context(planner: Planner, target_ctx: int | None) -> int:
    """The context a best fit aims at: `target_ctx`, else DEFAULT_CONTEXT or the training
    context if shorter."""
    return target_ctx or min(DEFAULT_CONTEXT, planner.profiles[0].n_ctx_train or DEFAULT_CONTEXT)


def _decision(path, info, source, choice, manual: ManualPlan, best) -> LoadDecision:
    return LoadDecision(
        path=path,
        info=info,
        source=source,
        choice=choice,
        plan=manual,
        best=best,
        params=manual.settings.model_params(),
    )


def _options_among(
    siblings: Iterable[str | Path],
    path: Path,
    info: ModelInfo,
    machine: MachineSnapshot,
    target_ctx: int | None,
) -> list[LoadOption]:
    options = []
    for other in siblings:
        other = Path(other)
        if other.resolve() == path.resolve():
            continue
        try:
            other_info = check_model_file(other)
        except UnusableModelFile:
            continue
        if not same_model(info, other_info):
            continue
        decision = plan_load(other, machine, info=other_info, target_ctx=target_ctx)
        if decision.fits:
            options.append(
                LoadOption(f"{other.name}, {decision.summary()}", other, decision.params)
            )
    return options


def same_model(a: ModelInfo, b: ModelInfo) -> bool:
    """Two files of one model in other quantizations: same architecture, shape and vocabulary."""
    keys = ("block_count", "embedding_length", "attention.head_count", "feed_forward_length")
    return (
        a.architecture == b.architecture
        and a.vocab_size == b.vocab_size
        and all(
            a.metadata.get(f"{a.architecture}.{k}") == b.metadata.get(f"{b.architecture}.{k}")
            for k in keys
        )
    )


def sibling_files(path: str | Path) -> Sequence[Path]:
    """Other GGUF files in the same folder: in Hearth's library a folder is one Hub repository,
    which holds the quantizations of one model (and its vision projector, which is not one)."""
    path = Path(path)
    try:
        return sorted(
            p
            for p in path.parent.glob("*.gguf")
            if p.name != path.name and not is_projector_name(p.name)
        )
    except OSError:
        return ()
