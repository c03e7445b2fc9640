"""torch's CUDA caching allocator as the Hearth engine's process runs it: with expandable
segments, set in the environment the process starts with (torch reads it once, as its
allocator starts; set there, it is in place before the process imports torch).

Without them every allocation that finds no free block large enough takes a segment of its
own size from cudaMalloc, and segments never merge. A prefill chunk at a long context makes
and frees buffers of hundreds of MiB at every layer (K and V gathered, a matrix dequantized
for its GEMM) between small tensors that outlive the layer (the residual rows); one of those
placed in a freed large block leaves it too short for the next layer's buffer, which takes
a second segment: torch then holds that beside its peak allocation (469 MiB for Llama-3-8B
rot4/rot4 at 131,072 positions on a 12 GiB card, docs/measurements/2026-11-29-s16-call-3).
With expandable segments each pool (small allocations; the others) is one range of virtual
addresses that torch maps physical memory into as it grows (2 and 20 MiB at a time): a
buffer that finds no free block large enough extends the free block at the end of the range
by what it lacks, and freed neighbours always merge. (Whether the CUDA graph's private pool
is expanded too depends on torch's version: older ones kept ordinary segments there.)

A person's own PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF is left as it is (the memory
model, engine/planner/hearth_memory.py torch_reserved, counts for expandable segments). torch
has them on Linux only (built without the driver API elsewhere, it warns and ignores them).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

# PYTORCH_ALLOC_CONF is newer torch's name, read before the other; every torch the engine
# runs on (>= 2.4; expandable segments came with 2.1) reads PYTORCH_CUDA_ALLOC_CONF
ALLOC_CONF_NAMES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
EXPANDABLE_SEGMENTS = "expandable_segments:True"


def with_expandable_segments(env: Mapping[str, str], platform: str | None = None) -> dict[str, str]:
    """`env` for a process that runs the Hearth engine: PYTORCH_CUDA_ALLOC_CONF set to
    expandable segments on Linux (`platform`: sys.platform's) unless either allocator variable
    is set already."""
    out = dict(env)
    if (platform or sys.platform).startswith("linux") and not any(
        out.get(name) for name in ALLOC_CONF_NAMES
    ):
        out["PYTORCH_CUDA_ALLOC_CONF"] = EXPANDABLE_SEGMENTS
    return out
