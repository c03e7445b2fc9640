"""Will this model fit? A badge per Hub file, from its remote header, before any download.

Only the header is fetched (engine.gguf.remote.HubFileSource: ranged reads), for every part of
a split set, since each part describes its own share of the tensors. The planner then decides
for the request (the detected devices): fits on the GPU, fits with layers or experts offloaded
to RAM, or does not fit; the badge carries the plan's context length and its reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gguf import GGUFError, ModelInfo, read_model_info
from engine.gguf.remote import HubFileSource
from engine.hub.catalog import ModelFile
from engine.hub.split_info import merge_split_infos
from engine.hub_names import UnsafePath
from engine.planner import Plan, Planner, PlanRequest
from engine.session import best_fit

FITS = "fits"
FITS_WITH_OFFLOAD = "offload"
DOES_NOT_FIT = "does_not_fit"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class FitBadge:
    verdict: str  # FITS, FITS_WITH_OFFLOAD, DOES_NOT_FIT or UNKNOWN
    text: str  # short, for the badge itself
    detail: str  # the plan's context, offload and reasons, for a tooltip
    plan: Plan | None = None
    on_gpu: bool = False  # fits with every layer on the GPU


def remote_model_info(
    model: ModelFile, *, endpoint: str | None = None, token: str | bool | None = None
) -> ModelInfo:
    infos = [
        read_model_info(
            HubFileSource(f.repo_id, f.filename, f.revision, endpoint=endpoint, token=token),
            deadline_s=20.0,
        )
        for f in model.files
    ]
    return merge_split_infos(infos)


def badge_for_plan(result: Plan, request: PlanRequest) -> FitBadge:
    reasons = " ".join(result.reasons)
    choice = result.choice
    if not result.fits or choice is None:
        return FitBadge(DOES_NOT_FIT, "Does not fit", reasons or "No setting fits.", result)
    context = f"{choice.n_ctx:,} tokens of context"
    if not request.gpus:
        return FitBadge(FITS, "Fits (CPU)", f"Runs on the CPU with {context}.", result)
    all_on_gpu = choice.n_gpu_layers >= choice.n_layers + 1 and not choice.n_cpu_expert_layers
    if all_on_gpu:
        return FitBadge(FITS, "Fits", f"All on the GPU with {context}.", result, on_gpu=True)
    return FitBadge(
        FITS_WITH_OFFLOAD,
        "Fits with offload",
        f"{choice.offload_summary}, {context}; slower than all on the GPU.",
        result,
    )


def fit_badge(
    model: ModelFile,
    request: PlanRequest,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
) -> FitBadge:
    """The badge for a Hub model; UNKNOWN (with the reason) when its header cannot be read."""
    if not model.complete:
        return FitBadge(UNKNOWN, "Incomplete", "Parts of this split set are missing on the Hub.")
    try:
        info = remote_model_info(model, endpoint=endpoint, token=token)
    except GGUFError as exc:
        return FitBadge(UNKNOWN, "Unknown", f"Could not read the header: {exc}")
    except UnsafePath as exc:  # a listed name that leads elsewhere: nothing was requested
        return FitBadge(UNKNOWN, "Refused", exc.args[0])
    return local_fit_badge(info, request)


def local_fit_badge(info: ModelInfo, request: PlanRequest) -> FitBadge:
    """What the load policy would do with this file on this machine (engine.session), so the
    badge and the Model page never disagree."""
    return badge_for_plan(best_fit(Planner(info), request), request)
