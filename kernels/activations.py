"""SwiGLU, fused: y = silu(gate) * up = gate * sigmoid(gate) * up, computed in float32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor

_BLOCK = 1024


@triton.jit
def _swiglu_kernel(g_ptr, u_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    require()
    if gate.shape != up.shape:
        raise UnsupportedTensor(
            f"SwiGLU gate {tuple(gate.shape)} and up {tuple(up.shape)} differ in shape"
        )
    gate, up = gate.contiguous(), up.contiguous()
    y = torch.empty_like(gate)
    n = gate.numel()
    if n:
        _swiglu_kernel[(triton.cdiv(n, _BLOCK),)](gate, up, y, n, BLOCK=_BLOCK)
    return y
