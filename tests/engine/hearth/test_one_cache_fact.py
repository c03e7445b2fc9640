"""One fact, one place: the KV cache the Hearth driver builds on a GPU is the cache the planner
counts, allocation by allocation (engine/hearth/cache_layout.py is the rule both call).

The driver's own cache-making path runs with its device taken to be a GPU with kernels/; the
cache it asks for is then made on the CPU (allocation needs no kernel), and every tensor it
holds is set beside engine/planner/hearth_memory.py's list. A driver that built the plain
cache where the planner counts pages, or a format whose planes changed on one side only,
fails here."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest
import torch

import kernels.kv_cache
from engine.hearth import caches
from engine.hearth.capabilities import K_FORMATS, V_FORMATS, kv_format_problem
from engine.planner.hearth_memory import HearthConfig, gpu_cache_layout, kv_allocations
from engine.runtime import hearth_load
from engine.runtime.protocol import ModelParams

DIMS = SimpleNamespace(n_layer=2, n_head_kv=2, head_dim=64)
N_CTX = 200  # not a whole number of pages
PAIRS = [
    (k, v)
    for k in K_FORMATS
    for v in V_FORMATS
    if not kv_format_problem(k, v, sliding_window=False, head_dim=DIMS.head_dim)
]


def _tensor_bytes(root) -> list[int]:
    """Bytes of every distinct storage reachable from `root` (the cache's own tensors)."""
    seen, found, stack = set(), {}, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | str | bytes | int | float):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            found[storage.data_ptr()] = storage.nbytes()
            continue
        stack.extend(gc.get_referents(obj))
    return list(found.values())


@pytest.fixture
def driver_cache(monkeypatch):
    """The cache the driver's make_kv_cache asks for on a GPU with kernels/, made on the CPU."""
    monkeypatch.setattr(kernels.kv_cache, "require", lambda: None)  # allocation only
    asked = []
    real = caches.new_kv_cache

    def on_the_cpu(layout, **dims):
        asked.append(layout)
        return real(layout, **{**dims, "device": "cpu"})

    monkeypatch.setattr(caches, "new_kv_cache", on_the_cpu)
    loaded = SimpleNamespace(ops=SimpleNamespace(name="kernels"), device="cuda", config=DIMS)

    def make(type_k: str, type_v: str):
        params = ModelParams(path="m.gguf", n_ctx=N_CTX, type_k=type_k, type_v=type_v)
        cache = hearth_load.make_kv_cache(loaded, params, N_CTX)
        return asked[-1], cache

    return make


@pytest.mark.parametrize(("type_k", "type_v"), PAIRS)
def test_the_driver_builds_the_cache_the_planner_counts(driver_cache, type_k, type_v):
    layout, cache = driver_cache(type_k, type_v)
    assert layout == gpu_cache_layout(type_k, type_v)
    assert layout.paged  # every pair the Model page offers is paged on a GPU, f16 too
    predicted = kv_allocations(DIMS, HearthConfig(N_CTX, type_k, type_v))
    # a few bytes of page bookkeeping each side (lengths, slots, the block table) aside
    big = 1024
    assert sorted(b for b in _tensor_bytes(cache) if b >= big) == sorted(
        b for b in predicted if b >= big
    )
    assert sum(_tensor_bytes(cache)) == pytest.approx(sum(predicted), abs=big)


def test_the_plain_cache_would_not_pass(driver_cache):
    """The check can fail: the plain f16 cache (one [layers, heads, n_ctx, dim] tensor per
    role) is not what the planner counts on a GPU."""
    from engine.hearth.cache_layout import cache_layout

    plain = caches.TorchKVCache(**vars(DIMS), n_ctx=N_CTX, device="cpu", dtype=torch.float16)
    assert not cache_layout("f16", "f16", kernels_on_gpu=False).paged
    predicted = kv_allocations(DIMS, HearthConfig(N_CTX, "f16", "f16"))
    assert sorted(b for b in _tensor_bytes(plain) if b >= 1024) != sorted(
        b for b in predicted if b >= 1024
    )
