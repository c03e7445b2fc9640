"""What every launcher asks of the device, and the in-kernel side of a programmatic dependent
launch: one place for both.

Programmatic dependent launch (PDL, Hopper and newer): a kernel launched with the launch_pdl
attribute may start while the kernel before it on the stream still runs. It must read nothing
that kernel writes, and write nothing, before `gdc_wait()` returns (the kernel before has
finished and its stores are visible); the kernel before lets it start early by calling
`gdc_launch_dependents()`. In a CUDA graph the edge is kept as a programmatic one.
"""

from __future__ import annotations

import functools
import os

import torch
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

__all__ = ["gdc_launch_dependents", "gdc_wait", "has_dependent_launch", "runs_assembly"]


def runs_assembly(device: torch.device) -> bool:
    """Inline PTX runs on a CUDA GPU, not in Triton's CPU interpreter."""
    return device.type == "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1"


@functools.cache
def has_dependent_launch(device: torch.device) -> bool:
    """Programmatic dependent launch here: compiled kernels on a GPU of sm_90 or newer, and a
    Triton whose launcher sets the attribute (its `launch_pdl` option)."""
    if not runs_assembly(device):
        return False
    from triton.backends.nvidia.compiler import CUDAOptions

    if "launch_pdl" not in CUDAOptions.__dataclass_fields__:
        return False
    return torch.cuda.get_device_capability(device) >= (9, 0)
