"""A paged KV cache's planes on the device (kv_cache.py): per layer and role (K or V) one tensor
per field of the format (kv_formats.py), for every page of the pool, and the three plane
arguments the kernels take (kv_write.py, decode_attention.py, kv_gather.py, kv_kivi.py).
engine/planner/hearth_memory.py counts these allocations.
"""

from __future__ import annotations

import torch

from kernels.kv_formats import GROUP, KVCacheSpec, kivi_group


def allocate_planes(fmt: str, n_pages: int, spec: KVCacheSpec, device) -> dict[str, torch.Tensor]:
    """A layer's K or V planes in format fmt for n_pages pages, by field name (q; scale and min
    where the format has them), each [n_pages, n_kv_heads, ...], zeros."""
    rows = (n_pages, spec.n_kv_heads, spec.page_size)
    d = spec.head_dim
    if fmt == "f16":
        return {"q": torch.zeros(*rows, d, dtype=torch.float16, device=device)}
    if fmt == "q8":
        return {
            "q": torch.zeros(*rows, d, dtype=torch.int8, device=device),
            "scale": torch.zeros(*rows, dtype=torch.float16, device=device),
        }
    if fmt == "kivi4":  # scale and min per group of positions and channel
        groups = (*rows[:2], spec.page_size // kivi_group(spec.page_size), d)
        return {
            "q": torch.zeros(*rows, d // 2, dtype=torch.uint8, device=device),
            "scale": torch.zeros(groups, dtype=torch.float16, device=device),
            "min": torch.zeros(groups, dtype=torch.float16, device=device),
        }
    per_byte = 2 if fmt == "rot4" else 4
    # each row's scales, then its mins, in one run (kv_tiles.load_scales_mins)
    scales_mins = torch.zeros(*rows, 2, d // GROUP, dtype=torch.float16, device=device)
    return {
        "q": torch.zeros(*rows, d // per_byte, dtype=torch.uint8, device=device),
        "scale": scales_mins[..., 0, :],
        "min": scales_mins[..., 1, :],
    }


def plane_pointers(planes: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """(q, scale, min): the three plane arguments every KV kernel takes."""
    q = planes["q"]  # formats without a scale or min field pass q in its place (never read)
    return q, planes.get("scale", q), planes.get("min", q)
