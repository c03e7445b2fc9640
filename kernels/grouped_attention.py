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

The mask is `prefill_mask`'s: additive (0 where a query sees a key, -inf elsewhere) in the
compute dtype, already repeated for the G folded rows, rows padded to MASK_ALIGNMENT elements.
That is the form SDPA hands to the memory-efficient kernel as it is (aten/src/ATen/native/
transformers/attention.cpp): a boolean mask is first turned into an additive copy of the
query's dtype (convert_boolean_attn_mask, at::where), and a mask whose strides but the last are
not multiples of the kernel's alignment (preprocess_mask: 8 elements since torch 2.2, 16
before) is copied into a padded tensor and sliced back (pad_bias); the kernel then checks the
bias's row stride against its own alignment (8 f16 or 4 f32 values). A caller makes the mask
once per prefill chunk and passes it to every layer of the chunk (the layers share the chunk's
positions): each layer is spared the boolean comparison [T, n_keys], its G-fold repeat and
SDPA's f16 copy of that [G*T, n_keys] (1 GiB for 512 rows over 256k positions of Llama-3-8B),
three passes writing 3 G + 1 bytes a row and key, so no layer allocates a buffer of the mask's
size and SDPA only reads it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# elements a mask row is padded to: a multiple of SDPA's preprocess_mask alignment (16 in torch
# 2.0-2.1, 8 since) and of the memory-efficient kernel's bias alignment (8 f16, 4 f32 values)
MASK_ALIGNMENT = 16


def prefill_mask(seen: torch.Tensor, group: int, dtype: torch.dtype) -> torch.Tensor:
    """`seen` [T, n_keys] bool (True: attend) as the additive mask grouped_prefill_attention
    takes: [group*T, n_keys] of `dtype`, 0 where seen and -inf elsewhere, row g*T + t token t's;
    a view of the first n_keys columns of rows padded to MASK_ALIGNMENT elements (the padding
    is never read). Made once per prefill chunk and shared by its layers."""
    n_tokens, n_keys = seen.shape
    padded = -(-n_keys // MASK_ALIGNMENT) * MASK_ALIGNMENT
    mask = torch.full((group, n_tokens, padded), float("-inf"), dtype=dtype, device=seen.device)
    mask[:, :, :n_keys].masked_fill_(seen, 0.0)  # `seen` broadcast over the G copies
    return mask.view(group * n_tokens, padded)[:, :n_keys]


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
