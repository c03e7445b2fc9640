"""A vector the host computes while the GPU goes on, added on the GPU once the host has
published it.

A decode step whose experts are split between ggml and the GPU (engine/hearth/staged_experts.py)
queues the work after its pause before ggml has finished: the copied experts' GEMV needs nothing
from the host. This launch is where that work meets ggml's sum:

    host   writes the sum (float32, pinned memory), then raises the flag (int32, pinned) to 1
    GPU    one program polls the flag over the bus until it is up, reads the sum from pinned
           memory (8 KB for a 2048-wide model), writes gpu_part + sum, lowers the flag to 0

The host's two writes reach memory in order (x86 keeps stores in order) and the program reads
the sum only after it has seen the flag up (a volatile read each, never cached), so it reads the
whole sum. A flag still down after `max_polls` polls (about a microsecond each: seconds in all)
ends the wait with the flag set to TIMED_OUT and the sum added as it is: the host reads the flag
before it next publishes and reports the step as failed (a stream never hangs on a host that
died mid-step).

    out = add_published(gpu_part, host_sum, flag)   # gpu_part [1, n], host_sum [1, n] f32

`add_published_torch` is the reference and the CPU's path: the sum added, the flag lowered.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.availability import require

TIMED_OUT = -1
MAX_POLLS = 1 << 23  # a poll is a read over the bus, about a microsecond: 8-10 s in all
BLOCK = 1024


@triton.jit
def _add_published_kernel(out_ptr, gpu_ptr, sum_ptr, flag_ptr, n, max_polls,
                          TIMED_OUT: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    ready = tl.load(flag_ptr, volatile=True)
    polls = 0
    while (ready == 0) & (polls < max_polls):
        ready = tl.load(flag_ptr, volatile=True)
        polls += 1
    for start in range(0, n, BLOCK):
        at = start + tl.arange(0, BLOCK)
        mask = at < n
        total = tl.load(gpu_ptr + at, mask=mask).to(tl.float32)
        total += tl.load(sum_ptr + at, mask=mask, volatile=True)
        tl.store(out_ptr + at, total.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(flag_ptr, tl.where(ready == 0, TIMED_OUT, 0))


def add_published(gpu_part: torch.Tensor, host_sum: torch.Tensor, flag: torch.Tensor,
                  max_polls: int = MAX_POLLS) -> torch.Tensor:  # fmt: skip
    """gpu_part + host_sum once `flag` is up (module docstring), in gpu_part's dtype. One
    launch of one program; host_sum and flag in pinned host memory on a GPU."""
    require()
    _check(gpu_part, host_sum, flag)
    out = torch.empty_like(gpu_part)
    _add_published_kernel[(1,)](
        out, gpu_part, host_sum, flag, gpu_part.numel(), max_polls,
        TIMED_OUT=TIMED_OUT, BLOCK=BLOCK, num_warps=4,
    )  # fmt: skip
    return out


def add_published_torch(gpu_part: torch.Tensor, host_sum: torch.Tensor,
                        flag: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """add_published where the host has published already (the CPU's path: the host step ran
    before this line): the sum added in float32, the flag lowered."""
    _check(gpu_part, host_sum, flag)
    out = (gpu_part.float() + host_sum.to(gpu_part.device)).to(gpu_part.dtype)
    flag.fill_(0)
    return out


def _check(gpu_part: torch.Tensor, host_sum: torch.Tensor, flag: torch.Tensor) -> None:
    if host_sum.dtype != torch.float32 or flag.dtype != torch.int32 or flag.numel() != 1:
        raise ValueError("host_sum float32, flag one int32")
    if host_sum.numel() != gpu_part.numel():
        raise ValueError(f"a sum of {host_sum.numel()} for a part of {gpu_part.numel()}")
    if not (gpu_part.is_contiguous() and host_sum.is_contiguous()):
        raise ValueError("gpu_part and host_sum must be contiguous")
