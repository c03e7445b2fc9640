"""The one factory the driver and the benchmarks build KV caches with: the cache that
engine/hearth/cache_layout.py names for a K/V pair (its own module: kv_cache and paged_cache
each use the other's attention, and this picks between them)."""

from __future__ import annotations

import torch

from engine.hearth.cache_layout import CacheLayout
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.paged_cache import PagedCacheAdapter


def new_kv_cache(
    layout: CacheLayout,
    *,
    n_layer: int,
    n_head_kv: int,
    head_dim: int,
    n_ctx: int,
    device: torch.device | str,
):
    """The cache `layout` names (engine/hearth/cache_layout.py): the one factory the driver and
    the benchmarks build caches with."""
    dims = dict(n_layer=n_layer, n_head_kv=n_head_kv, head_dim=head_dim, n_ctx=n_ctx)
    if layout.paged:
        return PagedCacheAdapter(
            **dims, device=device, k_format=layout.type_k, v_format=layout.type_v
        )
    dtype = torch.float16 if layout.plain_element_bytes == 2 else torch.float32
    return TorchKVCache(**dims, device=device, dtype=dtype)
