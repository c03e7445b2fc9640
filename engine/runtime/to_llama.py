"""The wire protocol's settings as the llama.cpp boundary's own types (engine/llama/params.py)."""

from __future__ import annotations

from dataclasses import fields

from engine.llama.params import ContextSettings, ModelSettings, SamplerSettings
from engine.runtime.protocol import ModelParams, SamplingParams


def model_settings(params: ModelParams) -> ModelSettings:
    return ModelSettings(
        path=params.path,
        n_gpu_layers=params.n_gpu_layers,
        use_mmap=params.use_mmap,
        tensor_split=tuple(params.tensor_split),
        cpu_tensors=tuple(params.cpu_tensors),
        rpc_servers=tuple(params.rpc_servers),
        load_mtp=params.speculative.method == "mtp" and params.n_parallel <= 1,
    )


def context_settings(params: ModelParams) -> ContextSettings:
    # "auto" never speculates on llama.cpp (speculative/setup.py)
    speculating = params.speculative.method not in ("off", "auto") and params.n_parallel <= 1
    return ContextSettings(
        n_ctx=params.n_ctx,
        n_batch=params.n_batch,
        n_ubatch=params.n_ubatch,
        n_threads=params.n_threads,
        flash_attn=str(params.flash_attn),
        type_k=str(params.type_k),
        type_v=str(params.type_v),
        swa_full=params.swa_full,
        # A speculative step samples every checked position in the graph, as plain decoding
        # samples its one (only token ids come back). Not with MTP: llama.cpp then outputs
        # every row of a batch, prompt included, and each would be sampled.
        backend_sampling=params.backend_sampling
        and not (speculating and params.speculative.method == "mtp"),
        n_parallel=max(1, params.n_parallel),
        n_outputs=_outputs_per_decode(params, speculating),
    )


def _outputs_per_decode(params: ModelParams, speculating: bool) -> int:
    """Rows of logits one llama_decode may return (llama.cpp's n_outputs_max)."""
    if not speculating:
        return 1
    return speculating_outputs(params.speculative.method, params.speculative.max_draft,
                               params.n_batch)  # fmt: skip


def speculating_outputs(method: str, max_draft: int, n_batch: int) -> int:
    """n_outputs_max while speculating (the planner sets their memory aside, planner/draft.py):
    the last token and the drafts; for MTP a whole batch, since MTP drafting reads the hidden
    state of every token, prompt included, and llama.cpp then outputs every row of a batch
    (engine/llama/mtp.py)."""
    if method == "mtp":
        return max(n_batch, max_draft + 1)
    return max_draft + 1


def sampler_settings(sampling: SamplingParams) -> SamplerSettings:
    """Each of the chain's settings from the request's field of the same name; the boundary's
    own settings that the protocol does not carry (grammar_seconds) keep their defaults."""
    given = {f.name: getattr(sampling, f.name) for f in fields(SamplerSettings)
             if hasattr(sampling, f.name)}  # fmt: skip
    return SamplerSettings(**given)
