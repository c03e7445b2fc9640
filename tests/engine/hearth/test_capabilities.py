"""What the Hearth engine runs, answered without torch, and in agreement with what it does."""

from __future__ import annotations

import pytest

from engine.hearth.cache_layout import PAGED_FORMATS
from engine.hearth.capabilities import (
    TENSOR_TYPES,
    device_unsupported_reason,
    kv_format_problem,
)


def test_the_tensor_types_are_the_ones_the_engine_reads():
    torch = pytest.importorskip("torch")
    del torch
    from engine.hearth.ops import TorchOps

    ops = TorchOps()
    assert all(ops.supports(t) for t in TENSOR_TYPES)
    assert not any(ops.supports(t) for t in range(64) if t not in TENSOR_TYPES)


def test_the_paged_formats_are_formats_the_kernels_hold():
    from kernels.kv_formats import check_format

    for fmt in PAGED_FORMATS:
        check_format(fmt, 128, "K")


@pytest.mark.parametrize(
    ("k", "v", "swa", "head_dim", "gpu", "problem"),
    [
        ("f16", "f16", True, 256, False, None),  # the plain cache runs anywhere
        ("f32", "f32", False, 80, False, None),
        ("q8", "rot4", False, 128, True, None),
        ("rot2", "rot4", False, 64, True, None),
        ("f16", "q8", False, 128, True, None),  # f16 beside a paged format: paged f16 pages
        ("q8", "q8", False, 128, False, "on a GPU"),
        ("q8", "q8", True, 256, True, None),  # kernels' paged attention has the window
        ("rot4", "rot2", False, 128, True, "no rot2 V cache"),
        ("q4_0", "q4_0", False, 128, True, "no q4_0 K cache"),
        ("q8", "q8", False, 80, True, "power of two"),
    ],
)
def test_kv_format_problems(k, v, swa, head_dim, gpu, problem):
    found = kv_format_problem(k, v, sliding_window=swa, head_dim=head_dim, gpu=gpu)
    assert found == problem if problem is None else problem in found


@pytest.mark.parametrize(
    ("backend", "cc", "problem"),
    [
        ("cuda", "8.0", None),
        ("cuda", "12.0", None),
        ("cuda", "7.0", "8.0 or newer"),
        ("rocm", None, "ROCm"),
        ("metal", None, "Metal"),
        ("vulkan", None, "Vulkan"),
        ("cpu", None, "no CUDA GPU"),
    ],
)
def test_device_problems(backend, cc, problem):
    found = device_unsupported_reason(backend, cc)
    assert found == problem if problem is None else problem in found


def test_the_sliding_window_flag_matches_kernels_attention():
    """Flip PAGED_SLIDING_WINDOW when kernels' paged decode attention takes a window."""
    import inspect

    pytest.importorskip("triton")
    from engine.hearth.capabilities import PAGED_SLIDING_WINDOW
    from kernels.kv_cache import PagedKVCache

    takes_window = "window" in inspect.signature(PagedKVCache.attend).parameters
    assert takes_window == PAGED_SLIDING_WINDOW
