"""Prefill attention for grouped-query heads under a position mask, without a score matrix.

    out[t, h] = softmax_j(q[t, h] . k[j, h // G] * scale + mask[t, j]) v[j, h // G]

with G = n_heads / n_kv_heads query heads per KV head (llama.cpp's order: query head h reads KV
head h // G). torch's scaled_dot_product_attention given `enable_gqa=True` and a mask takes its
plain math path on the GPU (torch 2.4-2.11), which builds the float32 scores of every head:
n_heads x T x n_keys x 4 bytes, 2 GiB for a 512-token chunk over 32k tokens of Llama-3-8B.
Here the G query heads of a KV head are folded into the query length instead,

    q [T, n_kv*G, D]  ->  [n_kv, G*T, D]    (row g*T + t is query head kv*G + g at token t)

so K and V have as many heads as the queries, no head is repeated, and the mask (repeated G
times along the rows) is an ordinary one, which SDPA's memory-efficient kernel is documented to
take (tiling the scores). The answer is the same arithmetic in another order (the tests compare
it with the plain formula). Measured on the H100 (torch 2.11): the first version, with 3-D
inputs, still took the math path (5.1 GiB beside the inputs for 512 queries over 32k
positions); the 4-D one's gpu test (tests/kernels/test_grouped_attention.py) says whether the
scores stay untiled.

The mask is kernels/prefill_masks.py's `prefill_mask`, made once per prefill chunk.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def grouped_prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """q [T, n_heads, D]; k and v heads first, [n_kv_heads, n_keys, D]; `mask` prefill_mask's
    [G*T, n_keys] in k's dtype. Computes in k's dtype; returns [T, n_heads, D] in q's dtype."""
    n_tokens, n_heads, head_dim = q.shape
    n_kv, n_keys = k.shape[0], k.shape[1]
    if n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads do not share {n_kv} KV heads evenly")
    group = n_heads // n_kv
    if mask.shape != (group * n_tokens, n_keys) or mask.dtype != k.dtype:
        raise ValueError(
            f"a mask of shape {tuple(mask.shape)} and {mask.dtype} for {n_tokens} queries x "
            f"{group} heads a KV head over {n_keys} keys in {k.dtype}: make it with prefill_mask"
        )
    folded = q.reshape(n_tokens, n_kv, group, head_dim).permute(1, 2, 0, 3)
    folded = folded.reshape(n_kv, group * n_tokens, head_dim).to(k.dtype)
    # [1, heads, rows, D]: SDPA's fused kernels take 4-D inputs only; given 3-D ones it took the
    # math path on the H100 (5.1 GiB beside the inputs at 512 x 32k, measured).
    out = F.scaled_dot_product_attention(
        folded[None], k[None], v[None], attn_mask=mask[None, None], scale=scale
    )[0]
    out = out.reshape(n_kv, group, n_tokens, head_dim).permute(2, 0, 1, 3)
    return out.reshape(n_tokens, n_heads, head_dim).to(q.dtype)
