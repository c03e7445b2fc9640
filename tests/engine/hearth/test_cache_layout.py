"""The one rule for which KV cache a K/V pair gets, read by the driver, planner and benchmarks."""

from __future__ import annotations

import pytest

from engine.hearth.cache_layout import CacheUnavailable, cache_layout


@pytest.mark.parametrize(
    ("k", "v", "kernels_on_gpu", "paged", "element"),
    [
        ("f16", "f16", True, True, None),  # the paged cache on a GPU, f16 too
        ("rot4", "rot4", True, True, None),
        ("kivi4", "rot4", True, True, None),
        ("q8", "f16", True, True, None),
        ("f32", "f32", True, False, 4),  # the paged cache has no f32
        ("f16", "f32", True, False, 4),
        ("f16", "f16", False, False, 2),  # the CPU: the plain torch cache
        ("f32", "f16", False, False, 4),
    ],
)
def test_each_pair_gets_its_cache(k, v, kernels_on_gpu, paged, element):
    layout = cache_layout(k, v, kernels_on_gpu=kernels_on_gpu)
    assert layout.paged is paged
    if element is not None:
        assert layout.plain_element_bytes == element


@pytest.mark.parametrize(
    ("k", "v", "kernels_on_gpu", "words"),
    [
        ("q4_0", "f16", True, "no q4_0 KV cache"),
        ("rot4", "rot4", False, "runs on kernels/ on a GPU"),
        ("f32", "rot4", True, "cannot mix an f32 KV cache"),
    ],
)
def test_a_pair_it_cannot_hold_is_refused_with_the_reason(k, v, kernels_on_gpu, words):
    with pytest.raises(CacheUnavailable, match=words):
        cache_layout(k, v, kernels_on_gpu=kernels_on_gpu)
