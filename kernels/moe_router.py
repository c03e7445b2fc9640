"""The router's GEMV fused with the selection of each token's top-k experts and their grouping
by expert (kernels/moe_routing.py: select_and_route's kernel code), in one launch.

From x and the router matrix, `route_from_router` computes the logits in the launch that
selects and groups them: programs of router rows and column splits store partial logits, and
the program that takes the last ticket (kernels/tickets.py) sums them in split order and
selects and groups (a decode step's router GEMV and routing: one launch, not two), by rank
from registers. From the FFN norm's input, `norm_and_route` computes the RMSNorm (and its
8-bit output for the experts) in that launch too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.act_quant import QuantizedActivation, empty_quantized, store_quantized
from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.launch import gdc_wait, has_dependent_launch
from kernels.moe_one_token_rule import ROUTER_FORMATS
from kernels.moe_routing import (
    ExpertRouting,
    check_logits_shape,
    rank_in_registers,
    routing_buffers,
    select_and_group,
    select_sizes,
    take_ranked,
)
from kernels.tickets import TicketCounters


@triton.jit
def _router_kernel(x_ptr, w_ptr, bias_ptr, part_ptr, logits_ptr, tickets_ptr, ids_ptr,
                   weights_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, T,
                   n_expert, n_embd, stride_x, r_ptr, ab_ptr, nw_ptr, y_ptr, h_ptr, xq_ptr,
                   xd_ptr, xs_ptr, stride_r, eps, K: tl.constexpr, K_PAD: tl.constexpr,
                   T_PAD: tl.constexpr, E_PAD: tl.constexpr, P_PAD: tl.constexpr,
                   BLOCK_E: tl.constexpr, SPLIT: tl.constexpr, N_SPLITS: tl.constexpr,
                   SOFTMAX_ALL: tl.constexpr, NORMALIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
                   SORT: tl.constexpr, RANK: tl.constexpr, GDC: tl.constexpr,
                   NORM: tl.constexpr = False, HAS_ATTN_BIAS: tl.constexpr = False,
                   BLOCK_N: tl.constexpr = 32):  # fmt: skip
    """route_from_router: program (tile, split) loads its BLOCK_E router rows' SPLIT columns
    in one load (on sm_90+ before waiting for the kernel that wrote x: a dependent launch),
    computes each token's partial logits from them with the same code (so a token's logits do
    not depend on T) and stores them in part [N_SPLITS, T, n_expert]; the program that takes
    the last ticket loads every split's partials at once, sums them in split order, stores
    the logits, and selects and groups: by rank from registers (rank_in_registers), else as
    _select_and_group_kernel does. Its only global round trips: the weights, x, the ticket,
    the partials.

    NORM (norm_and_route): x is the un-normed input a; each program computes the token's
    RMSNorm as kernels/norms.py's _rms_norm_kernel does, h = a (+ ab) + r over the whole row
    (BLOCK_N) for the statistic, again over its own columns for y = h / rms * nw, rounded to
    y's dtype, which its GEMV reads; the programs of tile 0 store their columns of h, y and y
    in 8 bits (act_quant.store_quantized)."""
    tile = tl.program_id(0)
    split = tl.program_id(1)
    rows = tile * BLOCK_E + tl.arange(0, BLOCK_E)
    row_mask = rows < n_expert
    cols = split * SPLIT + tl.arange(0, SPLIT)
    col_mask = cols < n_embd
    w = tl.load(w_ptr + rows[:, None].to(tl.int64) * n_embd + cols[None, :],
                mask=row_mask[:, None] & col_mask[None, :], other=0.0).to(tl.float32)  # fmt: skip
    if NORM:
        nw = tl.load(nw_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        if HAS_ATTN_BIAS:
            ab = tl.load(ab_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    if GDC:  # x and every write only after the kernel before has ended
        gdc_wait()
    for token in range(T):
        if NORM:
            whole = tl.arange(0, BLOCK_N)
            in_row = whole < n_embd
            hw = tl.load(x_ptr + token * stride_x + whole, mask=in_row, other=0.0).to(tl.float32)
            if HAS_ATTN_BIAS:
                hw += tl.load(ab_ptr + whole, mask=in_row, other=0.0).to(tl.float32)
            hw += tl.load(r_ptr + token * stride_r + whole, mask=in_row, other=0.0).to(tl.float32)
            inv_rms = 1.0 / tl.sqrt(tl.sum(hw * hw, axis=0) / n_embd + eps)
            h = tl.load(x_ptr + token * stride_x + cols, mask=col_mask, other=0.0).to(tl.float32)
            if HAS_ATTN_BIAS:
                h += ab
            h += tl.load(r_ptr + token * stride_r + cols, mask=col_mask, other=0.0).to(tl.float32)
            y = (h * inv_rms * nw).to(y_ptr.dtype.element_ty)
            if tile == 0:
                tl.store(h_ptr + token * n_embd + cols, h.to(h_ptr.dtype.element_ty), mask=col_mask)
                tl.store(y_ptr + token * n_embd + cols, y, mask=col_mask)
                store_quantized(y.to(tl.float32), token * n_embd + split * SPLIT,
                                (token + 1) * n_embd, xq_ptr, xd_ptr, xs_ptr, SPLIT)  # fmt: skip
            xv = y.to(tl.float32)
        else:
            xv = tl.load(x_ptr + token * stride_x + cols, mask=col_mask, other=0.0).to(tl.float32)
        tl.store(part_ptr + (split * T + token) * n_expert + rows, tl.sum(w * xv[None, :], axis=1),
                 mask=row_mask)  # fmt: skip
    tl.debug_barrier()
    ticket = tl.atomic_add(tickets_ptr, 1, sem="acq_rel", scope="gpu")
    if ticket == tl.num_programs(0) * N_SPLITS - 1:
        t = tl.arange(0, T_PAD)[:, None]
        e = tl.arange(0, E_PAD)[None, :]
        valid = (t < T) & (e < n_expert)
        x = tl.zeros((T_PAD, E_PAD), tl.float32)
        for s in tl.static_range(N_SPLITS):  # in split order: the same sums whatever ran first
            x += tl.load(part_ptr + (s * T + t) * n_expert + e, mask=valid, other=0.0,
                         cache_modifier=".cg")  # fmt: skip
        tl.store(logits_ptr + t * n_expert + e, x, mask=valid)
        if HAS_BIAS:
            x += tl.load(bias_ptr + e, mask=e < n_expert, other=0.0)
        x = tl.where(valid, x, float("-inf"))
        if RANK:
            x = tl.where(x == x, x, float("-inf"))  # a NaN score ranks as -inf
            take_ranked(x, rank_in_registers(x, E_PAD), ids_ptr, weights_ptr, order_ptr,
                         expert_ptr, start_ptr, count_ptr, n_groups_ptr, T, n_expert, K, T_PAD,
                         E_PAD, SOFTMAX_ALL, NORMALIZE)  # fmt: skip
        else:
            select_and_group(x, ids_ptr, weights_ptr, order_ptr, expert_ptr, start_ptr,
                              count_ptr, n_groups_ptr, T, n_expert, K, K_PAD, T_PAD, E_PAD,
                              P_PAD, SOFTMAX_ALL, NORMALIZE, SORT)  # fmt: skip
        tl.atomic_xchg(tickets_ptr, 0)


@dataclass(frozen=True)
class RouterConfig:
    """route_from_router's tiles: rows of the router a program, columns a program (a power of
    two). Qwen3-30B-A3B's 128 x 2048 router: 32 x 4 programs; gpt-oss's 32 x 2880: 8 x 6.
    pdl: a dependent launch where the GPU has one (the weights loaded while the norm before
    still runs); without one (before sm_90, the interpreter) the same kernel launches plain."""

    block_e: int = 4
    split: int = 512
    num_warps: int = 4
    pdl: bool = True


DEFAULT_ROUTER = RouterConfig()


# one counter a device, shared by the launches of a stream (each leaves it at zero)
_TICKETS = TicketCounters(minimum=1)


def route_from_router(x: torch.Tensor, router, top_k: int, *, softmax_all: bool,
                      normalize: bool, bias: torch.Tensor | None = None,
                      method: str | None = None, config: RouterConfig | None = None,
                      selection: str | None = None
                      ) -> tuple[ExpertRouting, torch.Tensor]:  # fmt: skip
    """x [T, n_embd] and the router (a kernels.PackedWeight [n_expert, n_embd] of
    ROUTER_FORMATS) -> (the ExpertRouting select_and_route gives for x's router logits, those
    logits [T, n_expert] float32), in one launch: the router's GEMV in programs of rows and
    splits of columns, and the selection and grouping by the program that takes the last
    ticket (kernels/tickets.py) once every partial logit is stored, in place of the float
    GEMV's launch and select_and_route's. The logits are float32 sums of float32 products as
    the float GEMV's, in another order; each token's are computed alone, the same bits at
    any T. selection and method: select_and_route's."""
    require()
    _check_router(router, x, top_k, bias)
    x = x if x.stride(1) == 1 else x.contiguous()
    routing, logits = _launch_router(x, router, top_k, softmax_all, normalize, bias, method,
                                     config or DEFAULT_ROUTER, selection, None)  # fmt: skip
    return routing, logits


@dataclass(frozen=True)
class NormedAndRouted:
    """norm_and_route's results: the norm's (y, h, y in 8 bits) and the router's."""

    y: torch.Tensor
    h: torch.Tensor
    quantized: QuantizedActivation
    routing: ExpertRouting
    logits: torch.Tensor


def norm_and_route(a: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                   eps: float, router, top_k: int, *, softmax_all: bool, normalize: bool,
                   bias: torch.Tensor | None = None, attn_bias: torch.Tensor | None = None,
                   config: RouterConfig | None = None,
                   selection: str | None = None) -> NormedAndRouted:  # fmt: skip
    """rms_norm_quantized(a, norm_weight, eps, residual, bias=attn_bias) and route_from_router
    on its y, in the router's one launch (one launch a MoE layer fewer at decode): a [T,
    n_embd], residual [T, n_embd] (h = a (+ attn_bias) + residual in residual's dtype, y in
    a's), n_embd a multiple of 32. Every program of the router computes the norm's statistic
    of the whole row itself; y, h and y's 8 bits are the norm kernel's values (its statistic
    summed in another order: within a float32 rounding of it)."""
    require()
    _check_router(router, a, top_k, bias)
    n_embd = a.shape[1]
    if n_embd % 32:
        raise UnsupportedTensor(f"8-bit activations need rows of whole 32s, not {n_embd}")
    if tuple(residual.shape) != tuple(a.shape) or tuple(norm_weight.shape) != (n_embd,):
        raise UnsupportedTensor(
            f"residual {tuple(residual.shape)} and norm weight {tuple(norm_weight.shape)} for "
            f"an input of shape {tuple(a.shape)}"
        )
    if attn_bias is not None and tuple(attn_bias.shape) != (n_embd,):
        raise UnsupportedTensor(f"bias of shape {tuple(attn_bias.shape)} for rows of {n_embd}")
    cfg = config or DEFAULT_ROUTER
    a = a if a.stride(1) == 1 else a.contiguous()
    residual = residual if residual.stride(1) == 1 else residual.contiguous()
    n_tokens, device = a.shape[0], a.device
    y = torch.empty(n_tokens, n_embd, dtype=a.dtype, device=device)
    h = torch.empty(n_tokens, n_embd, dtype=residual.dtype, device=device)
    quantized = empty_quantized(n_tokens, n_embd, device)
    norm = (residual, attn_bias if attn_bias is not None else norm_weight, norm_weight, y, h,
            quantized.words, quantized.scales, quantized.sums, residual.stride(0), float(eps),
            attn_bias is not None)  # fmt: skip
    routing, logits = _launch_router(a, router, top_k, softmax_all, normalize, bias, None, cfg,
                                     selection, norm)  # fmt: skip
    return NormedAndRouted(y, h, quantized, routing, logits)


def _check_router(router, x: torch.Tensor, top_k: int, bias) -> None:
    if router.fmt.name not in ROUTER_FORMATS:
        raise UnsupportedTensor(
            f"a {router.fmt.name} router: route_from_router reads {', '.join(ROUTER_FORMATS)}; "
            "take the GEMV and select_and_route"
        )
    n_expert, n_embd = router.n_out, router.n_in
    if x.dim() != 2 or x.shape[0] < 1 or x.shape[1] != n_embd:
        raise UnsupportedTensor(
            f"input of shape {tuple(x.shape)}: expected (T, {n_embd}) for this router"
        )
    check_logits_shape(x.shape[0], n_expert, top_k, bias)


def _launch_router(x, router, top_k, softmax_all, normalize, bias, method, cfg: RouterConfig,
                   selection, norm) -> tuple[ExpertRouting, torch.Tensor]:  # fmt: skip
    """The router's launch (norm: norm_and_route's tensors and flag, or None)."""
    n_tokens, device = x.shape[0], x.device
    n_expert, n_embd = router.n_out, router.n_in
    ids, weights, groups = routing_buffers(n_tokens, n_expert, top_k, device)
    n_splits = triton.cdiv(n_embd, cfg.split)
    part = torch.empty(n_splits, n_tokens, n_expert, dtype=torch.float32, device=device)
    logits = torch.empty(n_tokens, n_expert, dtype=torch.float32, device=device)
    grid = (triton.cdiv(n_expert, cfg.block_e), n_splits)
    args = (x, router.planes["w"], bias if bias is not None else logits, part, logits,
            _TICKETS.get(device, 1), ids, weights, *groups, n_tokens, n_expert, n_embd,
            x.stride(0))  # fmt: skip
    sizes = select_sizes(n_tokens, n_expert, top_k, method, selection)
    flags = dict(SOFTMAX_ALL=softmax_all, NORMALIZE=normalize, HAS_BIAS=bias is not None)
    gdc = cfg.pdl and has_dependent_launch(device)
    del sizes["RANK_CHUNK"]
    if norm is None:  # (the norm's pointers unused: x stands in for them)
        norm_args, has_attn_bias = (x, x, x, x, x, x, x, x, 0, 0.0), False
    else:
        norm_args, has_attn_bias = norm[:-1], norm[-1]
    _router_kernel[grid](
        *args, *norm_args, BLOCK_E=cfg.block_e, SPLIT=cfg.split, N_SPLITS=n_splits, GDC=gdc,
        NORM=norm is not None, HAS_ATTN_BIAS=has_attn_bias,
        BLOCK_N=triton.next_power_of_2(n_embd), num_warps=cfg.num_warps,
        **({"launch_pdl": True} if gdc else {}), **flags, **sizes,
    )  # fmt: skip
    return ExpertRouting(ids, weights, n_expert, *groups), logits
