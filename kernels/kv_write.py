"""The KV cache's write path: new K and V rows -> (bias, head norm, RoPE on K) -> rotation for
rot formats -> quantize -> store in their pages; with a step's queries, Q's heads normed and
rotated in the same launch.

    k' = RoPE(rms_norm(k + bk) * k_norm, pos)  bias, norm and RoPE where given
    stored = quantize(fmt, R k' if rot else k')  (kv_formats.py has the formats)
    q' = RoPE(rms_norm(q + bq) * q_norm, pos)  into q_out (HQ > 0)

Grid (rows, HQ + ceil(HKV / KV_HEADS)): a program per query head (HQ of them, none for a plain
write) and per KV_HEADS key/value heads of a row. A decode step's one row is then HQ + HKV
small programs side by side (RoPE's launch and the write's in one; the split kernel's launch
waits on this one alone). With queries, K and V are rounded to f16 before they are quantized,
as the engine's rows reach a plain write (f16, RoPE's output), so that a step stores the same
codes either way.

A decode step can instead have the attention's split kernel do this launch's work
(decode_attention.py's WRITE, `StepRow`, with `step_kv_rows`, `store_k_rows` and `store_v_rows`
below: the same bits): each of a KV head's programs then biases and rotates its query heads,
and the one that reads the newest page writes the row. That won where a group is small and has
no head norms (Llama-3-8B) and lost elsewhere (Qwen3-30B-A3B, gpt-oss-20b;
docs/decisions/2026-11-30-kv-write-in-the-attention.md), so those steps, a speculative check's
rows and a prefill chunk's (whose attention, torch's SDPA over the gathered pages, needs the
queries rotated first) keep this launch.

kivi4 K is quantized a page at a time (kv_kivi.py): here its rows (and V's, beside V's own
format) are only stored as f16, into the write's scratch (then kivi_seal_kernel and
kivi_open_kernel run), or for a single row straight into the sequence's open page (then only
the seal kernel, at a page's last slot).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.errors import UnsupportedTensor
from kernels.kv_tiles import KIVI4, ROT2, ROT4, rotate_rows, store_rows
from kernels.launch import gdc_launch_dependents, gdc_wait
from kernels.rope import inv_freq_tensor, rope_rows
from kernels.rope_tables import Rope


@triton.jit
def _store_query(q_ptr, q_out_ptr, t, head, pos, stride_qt, q_bias_ptr, q_norm_ptr, eps,
                 inv_freq_ptr, mscale, HQ: tl.constexpr, D: tl.constexpr, N_ROT: tl.constexpr,
                 NEOX: tl.constexpr, Q_BIAS: tl.constexpr, HAS_NORM: tl.constexpr):  # fmt: skip
    """Query head `head` of row t (+ bias, normed) rotated into q_out [rows, HQ, D]."""
    one = tl.arange(0, 1)
    q = rope_rows(q_ptr + t * stride_qt + head * D + one * 0, one == 0, pos, inv_freq_ptr,
                  mscale, q_bias_ptr + head * D + one * 0, q_norm_ptr, eps, D, N_ROT, NEOX,
                  Q_BIAS, HAS_NORM)  # fmt: skip
    j = tl.arange(0, D)[None, :]
    tl.store(q_out_ptr + (t * HQ + head) * D + j, q.to(q_out_ptr.dtype.element_ty))


@triton.jit
def step_slots(table_ptr, pos, table_pages, heads, HKV: tl.constexpr, P: tl.constexpr):
    """(the cache rows of `heads` at position pos, which of them to store, whether pos has a
    page): through the block table at table_ptr of table_pages pages; a position past it, or
    on a page not grown (-1), stores nothing."""
    in_table = (pos >= 0) & (pos // P < table_pages)
    page = tl.load(table_ptr + pos // P, mask=in_table, other=-1)
    in_table = in_table & (page >= 0)
    rows = (page * HKV + heads) * P + pos % P
    return rows, (heads < HKV) & in_table, in_table


@triton.jit
def step_kv_rows(k_rows, v_rows, heads, head_mask, pos, inv_freq_ptr, mscale, k_bias_ptr,
                 v_bias_ptr, k_norm_ptr, eps, D: tl.constexpr, ROPE: tl.constexpr,
                 N_ROT: tl.constexpr, NEOX: tl.constexpr, K_BIAS: tl.constexpr,
                 V_BIAS: tl.constexpr, HAS_NORM: tl.constexpr, AS_F16: tl.constexpr):  # fmt: skip
    """K and V of `heads` at row pointers k_rows, v_rows [R] as they are stored, float32 [R, D]:
    biased, K's heads normed and rotated (ROPE), rounded to f16 first (AS_F16)."""
    j = tl.arange(0, D)
    mask = head_mask[:, None]
    if ROPE:
        k = rope_rows(k_rows, head_mask, pos, inv_freq_ptr, mscale, k_bias_ptr + heads * D,
                      k_norm_ptr, eps, D, N_ROT, NEOX, K_BIAS, HAS_NORM)  # fmt: skip
    else:
        k = tl.load(k_rows[:, None] + j[None, :], mask=mask, other=0.0).to(tl.float32)
        if K_BIAS:
            k += tl.load(k_bias_ptr + heads[:, None] * D + j[None, :], mask=mask, other=0.0)
    v = tl.load(v_rows[:, None] + j[None, :], mask=mask, other=0.0).to(tl.float32)
    if V_BIAS:
        v += tl.load(v_bias_ptr + heads[:, None] * D + j[None, :], mask=mask, other=0.0)
    if AS_F16:
        k = k.to(tl.float16).to(tl.float32)
        v = v.to(tl.float16).to(tl.float32)
    return k, v


@triton.jit
def store_k_rows(k, rows, head_mask, signs, kq_ptr, ks_ptr, km_ptr, K_FMT: tl.constexpr,
                 R: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr):  # fmt: skip
    """K rows [R, D] into slots `rows` of a K format other than kivi4 (rotated first for the
    rot formats; signs: the rotation's signs / sqrt(D))."""
    if (K_FMT == ROT4) | (K_FMT == ROT2):
        k = rotate_rows(k, signs, R, D, LOG2D)
    store_rows(k, rows, head_mask, kq_ptr, ks_ptr, km_ptr, K_FMT, R, D)


@triton.jit
def store_v_rows(v, rows, head_mask, signs, vq_ptr, vs_ptr, vm_ptr, V_FMT: tl.constexpr,
                 R: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr):  # fmt: skip
    """V rows [R, D] into slots `rows` of its format (rotated first for rot4)."""
    if V_FMT == ROT4:
        v = rotate_rows(v, signs, R, D, LOG2D)
    store_rows(v, rows, head_mask, vq_ptr, vs_ptr, vm_ptr, V_FMT, R, D)


@triton.jit
def kv_write_kernel(
    q_ptr, q_out_ptr, k_ptr, v_ptr, block_table_ptr, start, positions_ptr, table_pages,
    stride_qt, stride_kt, stride_vt, q_bias_ptr, k_bias_ptr, v_bias_ptr, q_norm_ptr, k_norm_ptr,
    eps, signs_ptr, inv_freq_ptr, mscale,
    kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, vm_ptr, open_ptr, open_page_ptr, slot, scratch_len,
    HQ: tl.constexpr, HKV: tl.constexpr, KV_HEADS: tl.constexpr, D: tl.constexpr,
    LOG2D: tl.constexpr, P: tl.constexpr, K_FMT: tl.constexpr, V_FMT: tl.constexpr,
    ROPE: tl.constexpr, N_ROT: tl.constexpr, NEOX: tl.constexpr, POSITIONS: tl.constexpr,
    Q_BIAS: tl.constexpr = False, K_BIAS: tl.constexpr = False, V_BIAS: tl.constexpr = False,
    HAS_NORM: tl.constexpr = False, KIVI_DIRECT: tl.constexpr = False,
    LAUNCH_DEPENDENTS: tl.constexpr = False, WAIT_PRIOR: tl.constexpr = False,
    SLOT_PER_ROW: tl.constexpr = False,
):  # fmt: skip
    """Row t goes to position positions[t] (POSITIONS: read on the device, so a CUDA graph
    can replay the write at the next position) or start + t. A position past the block table
    writes nothing rather than into another sequence's page. Rows of K, V (and Q) are
    [HKV (HQ), D] at token strides stride_kt, stride_vt (stride_qt); biases float32 [heads, D]
    (Q_BIAS, K_BIAS, V_BIAS), norms float32 [D] (HAS_NORM: Q's by q_norm, K's by k_norm,
    before RoPE; ROPE rotates Q and K). kivi4 K: kq_ptr is the scratch [2, scratch_len, HKV, D]
    (K and V as written, row r at position first - first % P + r); KIVI_DIRECT (one row): the
    open page [2, HKV, P, D] of `slot` instead; SLOT_PER_ROW (KIVI_DIRECT for a batch's rows,
    PagedKVCache.write_rows: row t's block table is the t-th of table_pages / rows pages and
    its position moved into it): `slot` points to each row's slot. V is also stored in its own
    format, as for any K format. LAUNCH_DEPENDENTS (Hopper; AttentionTuning.chain_launches):
    the next launch may start now; the attention's split kernel, launched as a dependent,
    waits in-kernel for this grid to finish before it reads anything. WAIT_PRIOR: launched as
    the previous launch's dependent (the Q/K/V GEMV's), so wait for its grid before reading
    anything."""
    if LAUNCH_DEPENDENTS:
        gdc_launch_dependents()
    if WAIT_PRIOR:
        gdc_wait()
    t = tl.program_id(0)
    block = tl.program_id(1)
    pos = tl.load(positions_ptr + t).to(tl.int32) if POSITIONS else start + t
    if HQ > 0:  # noqa: SIM102 (compile-time first: a plain write compiles no query path)
        if block < HQ:
            _store_query(q_ptr, q_out_ptr, t, block, pos, stride_qt, q_bias_ptr, q_norm_ptr, eps,
                         inv_freq_ptr, mscale, HQ, D, N_ROT, NEOX, Q_BIAS, HAS_NORM)  # fmt: skip
    if block >= HQ:
        heads = (block - HQ) * KV_HEADS + tl.arange(0, KV_HEADS)
        rows, head_mask, in_table = step_slots(block_table_ptr, pos, table_pages, heads, HKV, P)
        signs = tl.load(signs_ptr + tl.arange(0, D))
        # a step's rows as f16, what the engine hands a plain write (the module docstring)
        k, v = step_kv_rows(k_ptr + t * stride_kt + heads * D, v_ptr + t * stride_vt + heads * D,
                            heads, head_mask, pos, inv_freq_ptr, mscale, k_bias_ptr, v_bias_ptr,
                            k_norm_ptr, eps, D, ROPE, N_ROT, NEOX, K_BIAS, V_BIAS, HAS_NORM,
                            HQ > 0)  # fmt: skip
        if K_FMT == KIVI4:
            j = tl.arange(0, D)
            if KIVI_DIRECT:
                if SLOT_PER_ROW:
                    row_slot = tl.load(slot + t)
                    page_of_row = pos // P - t * (table_pages // tl.num_programs(0))
                else:
                    row_slot = slot
                    page_of_row = pos // P
                key_rows = ((row_slot * 2) * HKV + heads) * P + pos % P
                value_rows = key_rows + HKV * P
                mask = head_mask[:, None]
                tl.store(open_ptr + key_rows[:, None] * D + j[None, :], k.to(tl.float16),
                         mask=mask)  # fmt: skip
                tl.store(open_ptr + value_rows[:, None] * D + j[None, :], v.to(tl.float16),
                         mask=mask)  # fmt: skip
                tl.store(open_page_ptr + row_slot, page_of_row, mask=in_table)
            else:
                first = tl.load(positions_ptr).to(tl.int32) if POSITIONS else start
                key_rows = (pos - first + first % P) * HKV + heads
                value_rows = key_rows + scratch_len * HKV
                mask = (heads < HKV)[:, None]
                tl.store(kq_ptr + key_rows[:, None] * D + j[None, :], k.to(tl.float16),
                         mask=mask)  # fmt: skip
                tl.store(kq_ptr + value_rows[:, None] * D + j[None, :], v.to(tl.float16),
                         mask=mask)  # fmt: skip
        else:
            store_k_rows(k, rows, head_mask, signs, kq_ptr, ks_ptr, km_ptr, K_FMT, KV_HEADS, D,
                         LOG2D)  # fmt: skip
        store_v_rows(v, rows, head_mask, signs, vq_ptr, vs_ptr, vm_ptr, V_FMT, KV_HEADS, D, LOG2D)


@dataclass(frozen=True)
class StepRow:
    """A decode step's own K and V row, [1, n_kv_heads, head_dim] each as the Q/K/V GEMV made
    them, for the attention's launch to write (PagedKVCache.attend(step_row=...)): biased
    (`biases`: bq, bk, bv, float32 or None each) and K rotated by `rope`, as `write` with
    queries stores them; the step's queries go to `attend` as the GEMV made them too, and are
    biased and rotated there. No head norms: with them (Qwen3) the attention's launch lost to
    the write's on an H200 (docs/decisions/2026-11-30-kv-write-in-the-attention.md)."""

    k: torch.Tensor
    v: torch.Tensor
    rope: Rope
    biases: tuple | None = None


def rope_arguments(n_q: int, n_kv: int, head_dim: int, rope: Rope | None, biases, norms,
                   device: torch.device, spare: torch.Tensor) -> tuple[tuple, dict]:  # fmt: skip
    """The arguments a write with RoPE passes its kernel (kv_write_kernel, or the decode split
    kernel's WRITE): (bq, bk, bv, q_norm, k_norm, eps, inv_freq, mscale) with `spare` for
    those absent, and the compile-time flags; the biases checked (float32, a row of heads)."""
    bq, bk, bv = biases if biases is not None else (None, None, None)
    for bias, heads in ((bq, n_q), (bk, n_kv), (bv, n_kv)):
        if bias is not None and (bias.numel() != heads * head_dim or bias.dtype != torch.float32):
            raise UnsupportedTensor(
                f"a {bias.dtype} bias of {bias.numel()} values for {heads} heads of "
                f"{head_dim}: need float32"
            )
    if norms is not None and rope is None:
        raise UnsupportedTensor("head norms come before RoPE: pass the rope")
    inv_freq = inv_freq_tensor(rope, device) if rope is not None else spare
    pointers = (
        bq if bq is not None else spare, bk if bk is not None else spare,
        bv if bv is not None else spare, norms.q_weight if norms is not None else spare,
        norms.k_weight if norms is not None else spare, norms.eps if norms is not None else 0.0,
        inv_freq, rope.mscale if rope is not None else 1.0,
    )  # fmt: skip
    flags = dict(
        ROPE=rope is not None, N_ROT=rope.n_rot if rope is not None else 2,
        NEOX=bool(rope is not None and rope.neox), Q_BIAS=bq is not None, K_BIAS=bk is not None,
        V_BIAS=bv is not None, HAS_NORM=norms is not None,
    )  # fmt: skip
    return pointers, flags
