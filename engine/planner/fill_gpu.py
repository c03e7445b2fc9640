""" "Use all of my GPU": the planner fills the card with context, up to the safety margin and never
past it.

    fill_request(request, n_ctx_train)   -> the same request, aiming at the whole card
    margin_text(total_bytes)             -> "4% of the card, at least 384 MiB: 983 MiB of this card"

Without it a first load aims at 8,192 tokens (engine/session/load_policy.py DEFAULT_CONTEXT),
which leaves most of a large card idle. With it the target is the model's training context
(times the requests served together: each may hold that much), and every layer stays on the
GPU: the card is filled with context, not traded for layers in system RAM. Where that gives
less context than the usual best fit (a model that does not fit whole on the GPU, or only with
a short context), the usual best fit loads instead. The KV type is chosen as usual for
the person's preference: where f16 stops short of the target, a leaner type that reaches it.
The planner's budget is unchanged: each GPU's free memory less the safety margin
(engine/planner/planner.py safety_margin), so the fill stops at the margin. A model whose
training context fits with room to spare stops there: more context than a model was trained
on is of no use, so the rest of the card stays free.

The margin, and why it is that size (measured, docs/planner-accuracy.md and issue 35):
- llama.cpp: on an H200, 126 cells of three shapes, the planner's worst under-estimate was
  205 MiB (-1.8%), its worst over-estimate +84 MiB; on simulated 8, 12 and 24 GiB cards every
  plan was within 1.2%. 4% of the card, at least 384 MiB, is about twice the worst miss.
- the Hearth engine: its memory model over-predicted by 11-13% on a 24 GiB card (memory left
  idle, not overrun); benchmarks/hearth_memory.py measures it on three shapes.
"""

from __future__ import annotations

from dataclasses import replace

from engine.planner.planner import MARGIN_FRACTION, MIN_MARGIN_BYTES, safety_margin
from engine.planner.records import PlanRequest
from engine.planner.search import DEFAULT_TARGET_CTX

MIB = 1024 * 1024


def fill_target(n_ctx_train: int | None, parallel: int = 1) -> int:
    """The context a filled card aims at: the training context per request (the planner's
    default target when the file does not say)."""
    return (n_ctx_train or DEFAULT_TARGET_CTX) * max(1, parallel)


def fill_request(request: PlanRequest, n_ctx_train: int | None, parallel: int = 1) -> PlanRequest:
    """`request` aiming at the whole card: the training context as the target, every layer and
    expert on the GPU; the budgets (free memory less the margin) as they were."""
    return replace(
        request,
        target_ctx=fill_target(n_ctx_train, parallel),
        allow_cpu_layers=False,
        allow_cpu_experts=False,
    )


def margin_text(total_bytes: int | None = None) -> str:
    """The margin in words, for the Preferences dialog and `hearth plan`."""
    rule = f"{MARGIN_FRACTION:.0%} of the card, at least {MIN_MARGIN_BYTES // MIB} MiB"
    if not total_bytes:
        return rule
    return f"{rule}: {safety_margin(total_bytes) / MIB:,.0f} MiB of this card"
