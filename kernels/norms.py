"""Fused RMSNorm, optionally with the residual add before it (one read of x and r, one write
of each output):

    h = x + residual          (when a residual is given; returned, it is the next residual)
    y = h / sqrt(mean(h^2) + eps) * weight

Statistics in float32 whatever the input dtype, as ggml does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor


@triton.jit
def _rms_norm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, N, eps, stride_x, stride_r,
                     HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        h += tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_ptr + row * N + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
    inv_rms = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (h * inv_rms * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual=None):
    """y, or (y, x + residual) when a residual is given; shapes [..., N], y in x's dtype."""
    require()
    n = x.shape[-1]
    if weight.shape != (n,):
        raise UnsupportedTensor(f"RMSNorm weight of shape {tuple(weight.shape)} for rows of {n}")
    if n > 65536:
        raise UnsupportedTensor(f"RMSNorm rows of {n} values: at most 65536")
    x2 = x.reshape(-1, n)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    has_residual = residual is not None
    if has_residual:
        if residual.shape != x.shape:
            raise UnsupportedTensor(
                f"residual of shape {tuple(residual.shape)} for input {tuple(x.shape)}"
            )
        r2 = residual.reshape(-1, n).contiguous()
        h = torch.empty(x2.shape, dtype=residual.dtype, device=x.device)
    else:
        r2, h = x2, y
    if x2.shape[0]:
        block = triton.next_power_of_2(n)
        _rms_norm_kernel[(x2.shape[0],)](
            x2, r2, weight, y, h, n, eps, x2.stride(0), r2.stride(0),
            HAS_RESIDUAL=has_residual, BLOCK=block, num_warps=min(16, max(1, block // 256)),
        )  # fmt: skip
    if has_residual:
        return y.reshape(x.shape), h.reshape(x.shape)
    return y.reshape(x.shape)
