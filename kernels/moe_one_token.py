"""The expert down projection for one token (a single sequence's decode step): every slot's
expert in one program, summed there, no partials and no tickets.

    out = sum_s weights[0, s] (Wd[e_s] h[s] + bd[e_s])        e_s = ids[0, s]

With one token the k picked experts are distinct and each serves one pair, so the grouping
moe_gemv.py's kernel launches over (a group per expert) has nothing to share, and its down
pays for the sum over the slots with partials in memory, a ticket a program and a last
program that adds them up. Here program `tile` takes output rows tile*BLOCK_N.. of every
slot's expert at once: R = S BLOCK_N weight rows (S = k padded to a power of two), rows
e_s n_out + tile BLOCK_N + i of the [n_expert n_out, n_in] matrix, loaded in one go
(load_pairs takes any rows), then sums its slots slot by slot with the routing weight in one
fma each and writes the output rows itself. The result is moe_gemv's down's bits: the same
explicit fmas, the same group tree, the same order of the slots.

At Qwen3-30B-A3B's down (2048 x 768 Q6_K, top-8) the launch is 128 programs of 16 rows x 8
slots and 8 warps: one program an SM, each with its 80 KB of weights in flight at once
(docs/decisions/2026-11-29-one-token-expert-gemv.md has the shapes measured; a gate/up of
this form lost to the grouped kernel at every shape and is not kept).

A row of groups of 32 that are not a power of two is loaded and summed in two chunks that are
(first_chunk, rest_chunk: Qwen3's 24 groups as 16 and 8), both loaded before the wait: the
tree over the row padded to a power of two is the two chunks' trees and one add, so the bits
are the padded row's, without loading or summing its masked groups (fewer registers and
instructions, a faster down: docs/kernels-moe.md has the figures).

h comes in float ([k, n_in]); each slot's row is rounded to 8 bits in the program
(moe_blocks.runs_in_8_bits over S n_groups groups at once: the bits quantize_activation would
store), then its words are laid out along the slot's BLOCK_N rows. Or h's 8-bit words, as the
caller's QuantizedActivation.

Only a whole row in one split (n_in up to 2048 weights; gpt-oss's 2880 goes through
moe_gemv.py) and T = 1 come here, and not Q4_K or Q6_K experts of whole super-blocks without
biases, which take moe_down_dp4a.py's down (faster: docs/decisions/
2026-12-01-one-token-down-over-the-experts-rows.md): moe_gemv.expert_down chooses.

Dependent launch (sm_90+): a program reads the routing (ids, weights) and its weights, then
waits for the kernel before it (griddepcontrol.wait) before it reads h, and lets the next
kernel in once its dot products are done, as moe_gemv.py's kernel does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import gdc_launch_dependents, gdc_wait
from kernels.moe_blocks import (
    Q8_0,
    group_terms,
    load_pairs,
    plane_args,
    run_sums,
    runs_in_8_bits,
)
from kernels.tree_sums import tree_sum


@triton.jit
def _slot_rows(t, S: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr):
    """[S, NG] (one value a slot and group) -> [S BN, NG] (each of the slot's BN rows)."""
    return tl.reshape(tl.broadcast_to(t[:, None, :], (S, BN, NG)), (S * BN, NG))


@triton.jit
def _slot_words(t, S: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr):
    """[S NG, 4] words (a slot's groups in turn) -> [S BN, NG, 4] (each of the slot's rows)."""
    t = tl.reshape(t, (S, NG, 4))
    return tl.reshape(tl.broadcast_to(t[:, None, :, :], (S, BN, NG, 4)), (S * BN, NG, 4))


@triton.jit
def _slot_value(y, s, S: tl.constexpr, BN: tl.constexpr):
    """Row s of y [S, BN] -> [BN], exactly (the other rows' zeros added)."""
    return tl.sum(tl.where(tl.arange(0, S)[:, None] == s, y, 0.0), axis=0)


@triton.jit
def _chunk_sums(x_ptr, xd_ptr, xs_ptr, u_lo, u_hi, s_lo, c_lo, s_hi, c_hi, r_lo, r_hi,
                group_mask, slot, row_mask, K, TOP_K, FMT: tl.constexpr, X_FLOAT: tl.constexpr,
                BLOCK_N: tl.constexpr, NG: tl.constexpr, S: tl.constexpr,
                ASM: tl.constexpr):  # fmt: skip
    """One chunk of NG groups (load_pairs' tiles of them, rows of every slot; group_mask
    [NG]: those in the row) against h -> [R], its sums (tree_sum over the chunk's groups)."""
    R: tl.constexpr = S * BLOCK_N
    if X_FLOAT:  # each slot's row of h in 8 bits, all S rows' groups at once
        m = tl.arange(0, S * NG)
        m_slot = m // NG
        m_lo = tl.reshape(tl.broadcast_to(r_lo[None, :], (S, NG)), (S * NG,))
        m_hi = tl.reshape(tl.broadcast_to(r_hi[None, :], (S, NG)), (S * NG,))
        m_group = tl.reshape(tl.broadcast_to(group_mask[None, :], (S, NG)), (S * NG,))
        m_mask = m_group & (m_slot < TOP_K)
        x_rows = x_ptr + m_slot.to(tl.int64) * K
        words, d, sums = runs_in_8_bits(
            x_rows[:, None, None, None], m_lo, m_hi, m_mask, S * NG, FMT >= Q8_0
        )
        w_lo, w_hi = tl.split(tl.permute(words, (0, 2, 1)))  # [S NG, 4] each
        x_lo = _slot_words(w_lo, S, BLOCK_N, NG)
        x_hi = _slot_words(w_hi, S, BLOCK_N, NG)
        d_lo, d_hi = tl.split(d)
        dx_lo = _slot_rows(tl.reshape(d_lo, (S, NG)), S, BLOCK_N, NG)
        dx_hi = _slot_rows(tl.reshape(d_hi, (S, NG)), S, BLOCK_N, NG)
        q_lo, q_hi = tl.split(sums)
        xs_lo = _slot_rows(tl.reshape(q_lo, (S, NG)), S, BLOCK_N, NG)
        xs_hi = _slot_rows(tl.reshape(q_hi, (S, NG)), S, BLOCK_N, NG)
    else:  # h's words: row s for slot s
        x_row = slot.to(tl.int64)[:, None]
        mask2 = row_mask[:, None] & group_mask[None, :]
        mask3 = mask2[:, :, None]
        at = x_ptr + x_row[:, :, None] * (K // 4) + tl.arange(0, 4)[None, None, :]
        x_lo = tl.load(at + r_lo[None, :, None] * 4, mask=mask3, other=0)
        x_hi = tl.load(at + r_hi[None, :, None] * 4, mask=mask3, other=0)
        dx_lo = tl.load(xd_ptr + x_row * (K // 32) + r_lo[None, :] // 2, mask=mask2, other=0.0)
        dx_hi = tl.load(xd_ptr + x_row * (K // 32) + r_hi[None, :] // 2, mask=mask2, other=0.0)
        xs_lo = tl.load(xs_ptr + x_row * (K // 16) + r_lo[None, :], mask=mask2, other=0)
        xs_hi = tl.load(xs_ptr + x_row * (K // 16) + r_hi[None, :], mask=mask2, other=0)
    y = group_terms(
        dx_lo, run_sums(u_lo, s_lo, c_lo, x_lo, xs_lo, ASM),
        dx_hi, run_sums(u_hi, s_hi, c_hi, x_hi, xs_hi, ASM),
    )  # fmt: skip
    return tree_sum(y, R, NG)


@triton.jit
def _one_token_down_kernel(
    x_ptr, xd_ptr, xs_ptr, out_ptr, p0, p1, p2, p3, p4, bias_ptr, ids_ptr, weights_ptr,
    N, K, NB, TOP_K,
    FMT: tl.constexpr, HAS_BIAS: tl.constexpr, X_FLOAT: tl.constexpr, BLOCK_N: tl.constexpr,
    NG: tl.constexpr, S: tl.constexpr, ASM: tl.constexpr, GDC: tl.constexpr = False,
    NG_REST: tl.constexpr = 0,
):  # fmt: skip
    """See the module docstring. X_FLOAT: h [k, K] in float (rounded here); else h's 8-bit
    words [k, K / 4] with xd, xs its scales and sums. out [1, N]. NG: groups of 32 weights a
    row in the first chunk (a power of two); NG_REST: the groups after them, padded to a power
    of two (0: none), a chunk of their own (Qwen3's 24 groups: 16 and 8, none masked); S: k
    padded to a power of two."""
    R: tl.constexpr = S * BLOCK_N
    tile = tl.program_id(0)
    r = tl.arange(0, R)
    slot = r // BLOCK_N  # rows of slot s: s BLOCK_N ..
    rows = tile * BLOCK_N + r % BLOCK_N
    slot_mask = slot < TOP_K
    row_mask = (rows < N) & slot_mask
    expert = tl.load(ids_ptr + slot, mask=slot_mask, other=0).to(tl.int64)
    wrow = expert * N + rows
    ge = tl.arange(0, NG)
    ga = ge < K // 32
    ua_lo, ua_hi, sa_lo, ca_lo, sa_hi, ca_hi, ra_lo, ra_hi = load_pairs(
        p0, p1, p2, p3, p4, wrow, row_mask, ge, ga, NB, FMT, ASM
    )
    if NG_REST > 0:  # the rest of the row's groups: loaded before the wait as the first are
        ge_rest = NG + tl.arange(0, NG_REST)
        gb = ge_rest < K // 32
        ub_lo, ub_hi, sb_lo, cb_lo, sb_hi, cb_hi, rb_lo, rb_hi = load_pairs(
            p0, p1, p2, p3, p4, wrow, row_mask, ge_rest, gb, NB, FMT, ASM
        )
    weight = tl.load(weights_ptr + slot, mask=slot_mask, other=0.0).to(tl.float32)
    if GDC:  # a dependent launch: h and every write only after the kernel before ends
        gdc_wait()
    y = _chunk_sums(x_ptr, xd_ptr, xs_ptr, ua_lo, ua_hi, sa_lo, ca_lo, sa_hi, ca_hi, ra_lo, ra_hi,
                    ga, slot, row_mask, K, TOP_K, FMT, X_FLOAT, BLOCK_N, NG, S, ASM)  # fmt: skip
    if NG_REST > 0:  # the tree's last level: the first chunk's sum and the rest's
        y += _chunk_sums(x_ptr, xd_ptr, xs_ptr, ub_lo, ub_hi, sb_lo, cb_lo, sb_hi, cb_hi, rb_lo,
                         rb_hi, gb, slot, row_mask, K, TOP_K, FMT, X_FLOAT, BLOCK_N, NG_REST, S,
                         ASM)  # fmt: skip
    if GDC:
        gdc_launch_dependents()
    if HAS_BIAS:
        y += tl.load(bias_ptr + expert * N + rows, mask=row_mask, other=0.0)
    y = tl.reshape(y, (S, BLOCK_N))
    w = tl.reshape(weight, (S, BLOCK_N))
    total = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for s in tl.static_range(S):  # slot by slot, one fma each, as moe_gemv's finish
        total = tl.fma(_slot_value(y, s, S, BLOCK_N), _slot_value(w, s, S, BLOCK_N), total)
    out_rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(out_ptr + out_rows, total.to(out_ptr.dtype.element_ty), mask=out_rows < N)


def first_chunk(groups: int) -> int:
    """The first chunk's groups of 32 weights: the largest power of two in the row."""
    return 1 << (groups.bit_length() - 1)


def rest_chunk(groups: int) -> int:
    """The rest's groups padded to a power of two, 0 where the first chunk takes the row
    (its tree with the first chunk's is the tree over the row padded to a power of two)."""
    rest = groups - first_chunk(groups)
    return triton.next_power_of_2(rest) if rest else 0


def launch_down(h: torch.Tensor, hq, w, routing, fmt_code: int, block_n: int, num_warps: int,
                asm: bool, gdc: bool) -> torch.Tensor:  # fmt: skip
    """One launch of the down for a step of one token (moe_gemv.expert_down chooses, and
    checks the shapes): h [k, n_in] -> [1, n_out]; w its ExpertWeight; hq: h in 8 bits, or
    None (rounded here)."""
    n_out, n_in = w.n_out, w.n_in
    out = torch.empty(1, n_out, dtype=h.dtype, device=h.device)
    bias = w.bias if w.bias is not None else out
    x_args = (h, h, h) if hq is None else (hq.words, hq.scales, hq.sums)
    extra = {"launch_pdl": True} if gdc else {}
    _one_token_down_kernel[(triton.cdiv(n_out, block_n),)](
        *x_args, out, *plane_args(w.packed), bias, routing.ids, routing.weights,
        n_out, n_in, n_in // w.packed.fmt.block_size, routing.top_k,
        FMT=fmt_code, HAS_BIAS=w.bias is not None, X_FLOAT=hq is None, BLOCK_N=block_n,
        NG=first_chunk(n_in // 32), NG_REST=rest_chunk(n_in // 32),
        S=triton.next_power_of_2(routing.top_k),
        ASM=asm, GDC=gdc, num_warps=num_warps, **extra,
    )  # fmt: skip
    return out
