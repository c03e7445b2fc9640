"""Speculative decoding's memory: a draft model beside the main one, and the extra logits rows.

The worker loads the draft model on the main model's device (all its layers on the GPU when the
main model has layers there) with a context as long as the main one and the same KV type
(engine/runtime/speculative/draft_model.py). Its weights, KV cache and compute buffer are
planned with the same memory model as any model, then set aside from the budgets the main model
is planned against: the main model's plan then fits beside it. The process's own overhead is
counted once, with the main model.

Checking drafts asks the main context for up to `max_draft + 1` rows of logits instead of one
(n_outputs_max), a float per vocabulary entry each: 8.7 MiB for 17 rows of a 128k vocabulary.

MTP drafting (engine/llama/mtp.py) reads the hidden state of every token, prompt included, and
llama.cpp then outputs every row of a batch: n_outputs_max is a whole batch (2,048 rows by
default), each a row of logits and a row of the hidden state, 1.2 GiB for a 152k vocabulary.
The MTP context is a second llama.cpp context over the file's NextN layers, as long as the main
one: its KV cache is that many layers of the main model's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from engine.gguf.model_info import ModelInfo
from engine.planner.kv_cache import CTX_PAD, bytes_per_cell, pad_to
from engine.planner.manual import ManualChoice, plan_manual
from engine.planner.planner import Planner
from engine.planner.profile_dims import build_profile
from engine.planner.records import PlanRequest
from engine.runtime.protocol import ModelParams, SpeculativeParams
from engine.runtime.to_llama import speculating_outputs

HOST = "host"
# the load's n_batch (neither the Model page nor the command line changes it): the rows an MTP
# load outputs at once
_LOAD_BATCH = next(f.default for f in fields(ModelParams) if f.name == "n_batch")


@dataclass(frozen=True)
class SpeculativeMemory:
    """Bytes speculative decoding takes per device id (GPU ids, and "host" for system RAM)."""

    per_device: tuple[tuple[str, int], ...]
    weights_bytes: int = 0
    kv_bytes: int = 0
    logits_bytes: int = 0  # the checked rows' logits, beyond the one row plain decoding has

    @property
    def total_bytes(self) -> int:
        return sum(n for _, n in self.per_device)


def draft_model_memory(
    draft: ModelInfo,
    request: PlanRequest,
    *,
    n_ctx: int,
    kv_type: str,
    flash_attn: bool,
    on_gpu: bool,
) -> SpeculativeMemory:
    """What the draft model takes where the worker puts it, with the main model's context."""
    choice = ManualChoice(
        n_ctx=n_ctx, kv_type=kv_type, flash_attn=flash_attn, n_gpu_layers=None if on_gpu else 0
    )
    plan = plan_manual(Planner(draft), request, choice)
    per_device = tuple((d.id, d.weights_bytes + d.kv_bytes + d.compute_bytes) for d in plan.devices)
    return SpeculativeMemory(
        per_device=tuple((i, n) for i, n in per_device if n > 0),
        weights_bytes=sum(d.weights_bytes for d in plan.devices),
        kv_bytes=sum(d.kv_bytes for d in plan.devices),
    )


def checked_logits_bytes(n_vocab: int, max_draft: int) -> int:
    """The extra logits rows a checking step keeps (float32), beyond plain decoding's one."""
    return max(0, max_draft) * max(0, n_vocab) * 4


def with_checked_logits(
    memory: SpeculativeMemory | None, n_vocab: int, max_draft: int, device: str
) -> SpeculativeMemory:
    """`memory` (or nothing) plus the checked rows' logits on `device` (the output layer's)."""
    memory = memory or SpeculativeMemory(per_device=())
    extra = checked_logits_bytes(n_vocab, max_draft)
    per_device = dict(memory.per_device)
    per_device[device] = per_device.get(device, 0) + extra
    return replace(memory, per_device=tuple(per_device.items()), logits_bytes=extra)


def mtp_memory(
    main: ModelInfo, *, n_ctx: int, kv_type: str, n_batch: int, max_draft: int, device: str
) -> SpeculativeMemory:
    """MTP drafting's memory on `device` (the output layer's): the whole batch of logits and
    hidden-state rows beyond plain decoding's one row, and the MTP context's KV cache (its
    NextN layers at the main context's length, each shaped like the main model's last layer).
    An estimate from the code paths (engine/runtime/to_llama.py, engine/llama/mtp.py): no MTP
    model has been measured."""
    profile = build_profile(main)
    rows = speculating_outputs("mtp", max_draft, n_batch)
    logits = (rows - 1) * profile.n_vocab * 4 + rows * profile.n_embd * 4
    layer = next((x for x in reversed(profile.kv_layers) if x.has_kv), None)
    per_cell = bytes_per_cell(layer, kv_type, kv_type, None) if layer is not None else 0
    kv = mtp_layers(main) * per_cell * pad_to(n_ctx, CTX_PAD)
    return SpeculativeMemory(per_device=((device, logits + kv),), kv_bytes=kv, logits_bytes=logits)


def speculation_memory(
    main: ModelInfo,
    speculative: SpeculativeParams,
    request: PlanRequest,
    *,
    n_ctx: int,
    kv_type: str,
    flash_attn: bool,
    draft: ModelInfo | None = None,
) -> SpeculativeMemory | None:
    """What `speculative` takes beside the main model (None: nothing, it is off): the draft
    model (`draft`, its header, when one is usable), MTP's rows and KV, or the checked logits;
    on the first GPU when the request has one, else in system RAM."""
    if speculative.method == "off":
        return None
    on_gpu = bool(request.gpus)
    device = request.gpus[0].id if on_gpu else HOST
    if speculative.method == "mtp":
        return mtp_memory(main, n_ctx=n_ctx, kv_type=kv_type, n_batch=_LOAD_BATCH,
                          max_draft=speculative.max_draft, device=device)  # fmt: skip
    memory = None
    if speculative.method == "draft_model" and draft is not None:
        memory = draft_model_memory(draft, request, n_ctx=n_ctx, kv_type=kv_type,
                                    flash_attn=flash_attn, on_gpu=on_gpu)  # fmt: skip
    return with_checked_logits(memory, main.vocab_size or 0, speculative.max_draft, device)


def reserve(request: PlanRequest, memory: SpeculativeMemory) -> PlanRequest:
    """`request` with speculative decoding's memory taken out of each device's budget."""
    taken = dict(memory.per_device)
    gpus = tuple(
        replace(g, budget_bytes=max(0, g.budget_bytes - taken.get(g.id, 0))) for g in request.gpus
    )
    host = request.host_budget_bytes
    if host is not None:
        host = max(0, host - taken.get(HOST, 0))
    return replace(request, gpus=gpus, host_budget_bytes=host)


def tokenizer_mismatch(main: ModelInfo, draft: ModelInfo) -> str | None:
    """Why the headers already show that `draft` cannot draft for `main` (None: they may; the
    worker compares the vocabularies token by token when it loads them)."""
    if main.tokenizer_model != draft.tokenizer_model:
        return f"its tokenizer is {draft.tokenizer_model}, the model's {main.tokenizer_model}"
    if main.tokenizer_pre != draft.tokenizer_pre:
        return f"its pre-tokenizer is {draft.tokenizer_pre}, the model's {main.tokenizer_pre}"
    if main.vocab_size and draft.vocab_size and abs(main.vocab_size - draft.vocab_size) > 128:
        return f"its vocabulary has {draft.vocab_size} tokens, the model's {main.vocab_size}"
    return None


def mtp_layers(info: ModelInfo) -> int:
    """The multi-token-prediction (NextN) layers the file declares (0: none)."""
    value = info.metadata.get(f"{info.architecture}.nextn_predict_layers")
    value = getattr(value, "value", value)
    return value if isinstance(value, int) and value > 0 else 0
