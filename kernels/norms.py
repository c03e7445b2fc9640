"""Fused RMSNorm, optionally with a bias and the residual add before it (one read of x and r,
one write of each output):

    h = x (+ bias) + residual (when a residual is given; returned, it is the next residual)
    y = h / sqrt(mean(h^2) + eps) * weight

The bias [N] is the producing matrix's (gpt-oss's attention output bias), added here in float32
rather than by a launch of its own.

Statistics in float32 whatever the input dtype, as ggml does.

`rms_norm_quantized` also writes y in 8 bits (kernels/act_quant.py) from the same launch, for
the integer GEMVs that read y next (Q/K/V, gate/up, the output matrix at decode): the values
are rounded to y's dtype first, so the codes and scales are the bits `quantize_activation(y)`
would give, without its launch (one of ~130 small launches in an 8B decode step). On sm_90+
it also lets the integer GEMV chained after it (a programmatic dependent launch,
kernels/launch.py) start at once: such a GEMV reads nothing of ours before its wait; any other
next kernel starts as usual.

On sm_90+ the norm is itself launched as the kernel before's dependent: it reads its weight
(and bias) before `gdc_wait`, so its launch and that read overlap the kernel that writes x
(Qwen3-30B-A3B's decode step on an H200: 1.917 -> 1.819 ms; Llama-3-8B's the same,
docs/decisions/2026-11-30-decode-step-launch-edges.md).
"""

from __future__ import annotations

from dataclasses import dataclass

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
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch
from kernels.moe_picks import weights_of_picks


@triton.jit
def _rms_norm_kernel(x_ptr, r_ptr, b_ptr, w_ptr, y_ptr, h_ptr, xq_ptr, xd_ptr, xs_ptr, N, eps,
                     stride_x, stride_r, HAS_RESIDUAL: tl.constexpr, HAS_BIAS: tl.constexpr,
                     QUANTIZE: tl.constexpr, LET_NEXT_START: tl.constexpr,
                     BLOCK: tl.constexpr, WAIT_PRIOR: tl.constexpr = False, z_ptr=None,
                     top_ptr=None, weights_ptr=None, n_expert=0, ROUTE: tl.constexpr = False,
                     K: tl.constexpr = 1, K_PAD: tl.constexpr = 1, E_PAD: tl.constexpr = 1,
                     SOFTMAX_ALL: tl.constexpr = True,
                     NORMALIZE: tl.constexpr = True):  # fmt: skip
    if LET_NEXT_START and not ROUTE:  # see the module docstring
        gdc_launch_dependents()
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        bias = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if WAIT_PRIOR:  # a dependent launch: the weights above are read before the kernel before ends
        gdc_wait()
    if LET_NEXT_START and ROUTE:  # the next reads the kernel before's picks early
        gdc_launch_dependents()
    h = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        h += bias
    if HAS_RESIDUAL:
        h += tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_ptr + row * N + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
    inv_rms = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / N + eps)
    if ROUTE:  # one row: the routing weights of the picks from the logits inv_rms z
        weights_of_picks(z_ptr, top_ptr, weights_ptr, inv_rms, n_expert, K, K_PAD, E_PAD,
                         SOFTMAX_ALL, NORMALIZE)  # fmt: skip
    y = (h * inv_rms * w).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + row * N + cols, y, mask=mask)
    if QUANTIZE:  # y as stored (masked columns are 0), in this row's part of the buffers
        store_quantized(y.to(tl.float32), row * N, (row + 1) * N, xq_ptr, xd_ptr, xs_ptr, BLOCK)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual=None, *, bias=None):
    """y, or (y, x (+ bias) + residual) when a residual is given; shapes [..., N] (bias [N]),
    y in x's dtype."""
    y, h, _ = _launch(x, weight, eps, residual, x.dtype, quantize=False, bias=bias)
    return y if residual is None else (y, h)


def rms_norm_quantized(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual=None,
    *,
    out_dtype: torch.dtype | None = None,
    bias: torch.Tensor | None = None,
    route: RouteWeights | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, QuantizedActivation]:
    """(y, x (+ bias) + residual or None, y in 8 bits as [rows, N] for `quant_matmul(y, w,
    quantized=...)`), one launch. y in out_dtype (default x's); N a multiple of 32.

    route (one row): a MoE layer's picks made beside wo (kernels/router_beside_wo.py), whose
    routing weights the launch computes from their scores and its 1/rms into route.weights.
    The next kernel is then let in after this one's wait, not at its start: it reads the picks
    before its own wait, which is safe once the kernel before this one (which wrote them) has
    ended."""
    if x.shape[-1] % 32:
        raise UnsupportedTensor(f"8-bit activations need rows of whole 32s, not {x.shape[-1]}")
    return _launch(x, weight, eps, residual, out_dtype or x.dtype, quantize=True, bias=bias,
                   route=route)  # fmt: skip


@dataclass(frozen=True)
class RouteWeights:
    """The scores z [n_expert] float32 (logits = z / rms) and those of the k picks, top [1, k]
    float32 (moe_picks.pick_top_k's), and weights [1, k] float32 to fill; softmax_all and
    normalize as select_and_route's."""

    scores: torch.Tensor
    top: torch.Tensor
    weights: torch.Tensor
    softmax_all: bool = True
    normalize: bool = True


def _route_args(route: RouteWeights | None, rows: int) -> dict:
    if route is None:
        return {}
    k, n_expert = route.top.shape[-1], route.scores.numel()
    if rows != 1 or tuple(route.weights.shape) != tuple(route.top.shape):
        raise UnsupportedTensor(f"routing weights for {rows} rows: the launch routes one")
    return dict(z_ptr=route.scores, top_ptr=route.top, weights_ptr=route.weights,
                n_expert=n_expert, ROUTE=True, K=k, K_PAD=triton.next_power_of_2(k),
                E_PAD=triton.next_power_of_2(n_expert), SOFTMAX_ALL=route.softmax_all,
                NORMALIZE=route.normalize)  # fmt: skip


def _launch(x, weight, eps, residual, out_dtype, *, quantize: bool, bias=None, route=None):
    require()
    n = x.shape[-1]
    if weight.shape != (n,):
        raise UnsupportedTensor(f"RMSNorm weight of shape {tuple(weight.shape)} for rows of {n}")
    if n > 65536:
        raise UnsupportedTensor(f"RMSNorm rows of {n} values: at most 65536")
    if bias is not None and bias.shape != (n,):
        raise UnsupportedTensor(f"bias of shape {tuple(bias.shape)} for rows of {n}")
    x2 = x.reshape(-1, n)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y = torch.empty(x2.shape, dtype=out_dtype, device=x.device)
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
    quantized = empty_quantized(x2.shape[0], n, x.device) if quantize else None
    # without quantizing, y stands in for the 8-bit buffers (never touched)
    xq, xd, xs = (quantized.words, quantized.scales, quantized.sums) if quantize else (y, y, y)
    routing = _route_args(route, x2.shape[0])
    if x2.shape[0]:
        block = triton.next_power_of_2(n)
        dependent = has_dependent_launch(x.device)
        _rms_norm_kernel[(x2.shape[0],)](
            x2, r2, weight if bias is None else bias, weight, y, h, xq, xd, xs, n, eps,
            x2.stride(0), r2.stride(0), HAS_RESIDUAL=has_residual, HAS_BIAS=bias is not None,
            QUANTIZE=quantize, BLOCK=max(block, 32),
            LET_NEXT_START=quantize and dependent,
            num_warps=min(16, max(1, block // 256)), WAIT_PRIOR=dependent,
            **routing,
            **({"launch_pdl": True} if dependent else {}),
        )  # fmt: skip
    return y.reshape(x.shape), h.reshape(x.shape) if has_residual else None, quantized
