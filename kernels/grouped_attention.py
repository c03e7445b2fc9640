"""Prefill attention for grouped-query heads under a position mask, without a score matrix.

    out[t, h] = softmax_j(q[t, h] . k[j, h // G] * scale + mask[t, j]) v[j, h // G]

with G = n_heads / n_kv_heads query heads per KV head (llama.cpp's order: query head h reads KV
head h // G). torch's scaled_dot_product_attention given `enable_gqa=True` and a mask takes its
plain math path on the GPU (torch 2.4-2.11), which builds the float32 scores of every head:
n_heads x T x n_keys x 4 bytes, 2 GiB for a 512-token chunk over 32k tokens of Llama-3-8B.
Here the G query heads of a KV head are folded into the query length instead,

    q [T, n_kv*G, D]  ->  [n_kv, G*T, D]    (row g*T + t is query head kv*G + g at token t)

so K and V have as many heads as the queries, no head is repeated, and the mask (repeated G
times along the rows) is an ordinary one: SDPA's memory-efficient kernel takes it and tiles the
scores. The answer is the same arithmetic in another order (the tests compare it with the plain
formula).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def grouped_prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    seen: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """q [T, n_heads, D]; k and v heads first, [n_kv_heads, n_keys, D]; `seen` [T, n_keys] bool
    (True: attend). Computes in k's dtype; returns [T, n_heads, D] in q's dtype."""
    n_tokens, n_heads, head_dim = q.shape
    n_kv = k.shape[0]
    if n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads do not share {n_kv} KV heads evenly")
    group = n_heads // n_kv
    folded = q.reshape(n_tokens, n_kv, group, head_dim).permute(1, 2, 0, 3)
    folded = folded.reshape(n_kv, group * n_tokens, head_dim).to(k.dtype)
    mask = seen.repeat(group, 1)  # row g*T + t is token t's
    out = F.scaled_dot_product_attention(folded, k, v, attn_mask=mask, scale=scale)
    out = out.reshape(n_kv, group, n_tokens, head_dim).permute(2, 0, 1, 3)
    return out.reshape(n_tokens, n_heads, head_dim).to(q.dtype)
