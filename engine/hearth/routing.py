"""Which experts each token goes through, and with what weight: a mixture-of-experts router.

    ids, weights = select_experts(logits, k, gating="softmax", normalize=True)

logits [T, n_expert] (the router matrix's output, float32) -> ids [T, k] (int64) and weights
[T, k] (float32), as llama.cpp's build_moe_ffn computes them (src/llama-graph.cpp):
- "softmax": probabilities over all experts, the k largest taken (qwen2moe, qwen3moe, Mixtral);
- "topk_softmax": the k largest logits, softmaxed over those k (gpt-oss);
then, with `normalize`, the k weights divided by their sum, clamped below at 2^-14 (the
smallest normal f16) as llama.cpp does against a zero sum. Pure torch, no host reads: it runs
inside a captured decode step.
"""

from __future__ import annotations

import torch

GATINGS = ("softmax", "topk_softmax")
_MIN_WEIGHT_SUM = 6.103515625e-5  # 2^-14


def select_experts(
    logits: torch.Tensor, k: int, *, gating: str, normalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """See the module docstring."""
    logits = logits.float()
    if gating == "softmax":
        probs = torch.softmax(logits, dim=-1)
        weights, ids = torch.topk(probs, k, dim=-1)
    elif gating == "topk_softmax":
        top, ids = torch.topk(logits, k, dim=-1)
        weights = torch.softmax(top, dim=-1)
    else:
        raise ValueError(f"unknown expert gating {gating!r} (known: {', '.join(GATINGS)})")
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=_MIN_WEIGHT_SUM)
    return ids, weights
