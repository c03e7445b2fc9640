"""SwiGLU, fused: y = silu(gate) * up = gate * sigmoid(gate) * up, computed in float32.

`swiglu_quantized` also writes y in 8 bits (kernels/act_quant.py) from the same launch, for the
integer GEMV of the down projection that reads it next: the values are rounded to y's dtype
first, so the codes and scales are the bits `quantize_activation(y)` would give. Like the
fused RMSNorm (kernels/norms.py) it lets a programmatic dependent launch start early on sm_90+.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.act_quant import (
    QuantizedActivation,
    empty_quantized,
    store_quantized,
)
from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.launch import gdc_launch_dependents, has_dependent_launch

_BLOCK = 1024  # a multiple of 32: a program's values are whole groups of the quantization


@triton.jit
def _swiglu_kernel(g_ptr, u_ptr, y_ptr, xq_ptr, xd_ptr, xs_ptr, n, row, stride_g, stride_u,
                   QUANTIZE: tl.constexpr, LET_NEXT_START: tl.constexpr,
                   BLOCK: tl.constexpr):  # fmt: skip
    """y's n values in rows of `row`; gate's and up's rows stride_g and stride_u apart (views
    into the joined gate/up product at several rows; `row` where contiguous)."""
    if LET_NEXT_START:  # as in kernels/norms.py
        gdc_launch_dependents()
    first = tl.program_id(0) * BLOCK
    offs = first + tl.arange(0, BLOCK)
    mask = offs < n
    r, c = offs // row, offs % row
    g = tl.load(g_ptr + r * stride_g + c, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + r * stride_u + c, mask=mask, other=0.0).to(tl.float32)
    y = (g * tl.sigmoid(g) * u).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, y, mask=mask)
    if QUANTIZE:  # rows of whole 32s: a group never spans two rows of the flat values
        store_quantized(y.to(tl.float32), first, n, xq_ptr, xd_ptr, xs_ptr, BLOCK)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return _launch(gate, up, quantize=False)[0]


def swiglu_quantized(
    gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, QuantizedActivation]:
    """(y, y in 8 bits as [rows, N] for `quant_matmul(y, w, quantized=...)`), one launch;
    N (the last axis) a multiple of 32."""
    if gate.shape[-1] % 32:
        raise UnsupportedTensor(f"8-bit activations need rows of whole 32s, not {gate.shape[-1]}")
    return _launch(gate, up, quantize=True)


def _launch(gate: torch.Tensor, up: torch.Tensor, *, quantize: bool):
    require()
    if gate.shape != up.shape:
        raise UnsupportedTensor(
            f"SwiGLU gate {tuple(gate.shape)} and up {tuple(up.shape)} differ in shape"
        )
    shape = gate.shape
    gate, up = _rows(gate), _rows(up)
    y = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    n = gate.numel()
    quantized = None
    xq = xd = xs = y  # stand-ins for the 8-bit buffers when not quantizing (never touched)
    if quantize:
        k = gate.shape[-1]
        quantized = empty_quantized(n // k if k else 0, k, gate.device)
        xq, xd, xs = quantized.words, quantized.scales, quantized.sums
    if n:
        _swiglu_kernel[(triton.cdiv(n, _BLOCK),)](
            gate,
            up,
            y,
            xq,
            xd,
            xs,
            n,
            gate.shape[-1],
            gate.stride(0),
            up.stride(0),
            QUANTIZE=quantize,
            BLOCK=_BLOCK,
            LET_NEXT_START=quantize and has_dependent_launch(gate.device),
        )
    return y.view(shape), quantized


def _rows(t: torch.Tensor) -> torch.Tensor:
    """t as [rows, K] with K's values side by side, rows any stride apart: the column slices
    of the joined gate/up product at several rows stay views (no copy launch); else a copy."""
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t
    return t2 if t2.stride(-1) == 1 or t2.shape[-1] == 1 else t2.contiguous()
