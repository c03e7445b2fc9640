"""The attention mask of a prefill chunk, made once and shared by the chunk's layers.

    seen = visible_slots(positions, slots, window)       # [T, n_slots] bool
    mask = prefill_mask(seen, group, dtype)              # what grouped_prefill_attention takes
    mask = chunk_mask(masks, scratch, page, positions, n_keys, window, group, dtype)

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

The paged cache's kivi4 keys add columns: each query sees its own page's keys as written (the
last write's scratch rows, appended after the stored keys), not as stored (own_pages_exact).
"""

from __future__ import annotations

import torch

# elements a mask row is padded to: a multiple of SDPA's preprocess_mask alignment (16 in torch
# 2.0-2.1, 8 since) and of the memory-efficient kernel's bias alignment (8 f16, 4 f32 values)
MASK_ALIGNMENT = 16


def visible_slots(positions: torch.Tensor, slots: torch.Tensor, window: int = 0) -> torch.Tensor:
    """[T, n_slots] bool: slot j is seen from position p when j <= p (and p - j < window, a
    sliding window). Compared against [T, 1] columns so that nothing [T, n_slots] but booleans
    is made (the distances as int64 would be 8 bytes a query and key); made once per prefill
    chunk, then turned into prefill_mask's additive mask (engine/planner/hearth_memory.py
    counts both)."""
    last = positions.reshape(-1, 1)
    seen = slots[None, :] <= last
    if window > 0:
        seen &= slots[None, :] > last - window
    return seen


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


def chunk_mask(masks, scratch, page, positions, n_keys, window, group, dtype) -> torch.Tensor:
    """prefill_mask of what a chunk's queries see over n_keys stored slots: from `masks` (a
    dict the caller keeps for one chunk) where an earlier layer of the chunk made it, else
    made (and kept there), one per window. `scratch`: the layer's kivi4 scratch (rows, start)
    or None; its rows are more keys (own_pages_exact), which only its first position and
    length place, the same at every layer a chunk's write went through; a mask is taken only
    by a layer whose scratch starts at the same position (the same int, or the same positions
    tensor the write was given) and is as long. `page`: the cache's page size."""
    start = scratch[1] if scratch is not None else None
    key = (window, n_keys, scratch[0].shape[1] if scratch is not None else 0)
    kept = masks.get(key) if masks is not None else None
    if kept is not None and _same_start(kept[0], start):
        return kept[1]
    slots = torch.arange(n_keys, device=positions.device)
    seen = visible_slots(positions, slots, window)
    if scratch is not None:
        seen = own_pages_exact(positions, n_keys, window, scratch, page, seen)
    mask = prefill_mask(seen, group, dtype)
    if masks is not None:
        masks[key] = (start, mask)
    return mask


def own_pages_exact(positions, n_keys, window, scratch, page, seen) -> torch.Tensor:
    """kivi4: each query of the chunk sees the keys and values of its own page as written
    (exact, as decode does through the open page), not as stored: the last write's scratch
    holds them (kv_kivi.py), appended as extra keys after the n_keys stored ones. Returns
    `seen` [T, n_keys] with its own page's stored slots hidden, followed by the scratch's
    columns."""
    rows, start = scratch
    device = positions.device
    first = start.reshape(-1)[:1] if isinstance(start, torch.Tensor) else start
    exact_slots = first - first % page + torch.arange(rows.shape[1], device=device)
    own = positions.reshape(-1, 1) // page
    exact_seen = visible_slots(positions, exact_slots, window)
    exact_seen &= (exact_slots[None, :] // page == own) & (exact_slots < n_keys)[None, :]
    seen &= torch.arange(n_keys, device=device)[None, :] // page != own
    return torch.cat([seen, exact_seen], dim=1)


def _same_start(kept, start) -> bool:
    """Whether two kivi4 scratches start at the same position as far as the host can tell
    without a sync: no scratch for either, the same int, or the same positions tensor."""
    if isinstance(kept, int) and isinstance(start, int):
        return kept == start
    return kept is start
