"""Decode attention over the paged KV cache (flash-decoding), GQA aware, any K/V formats.

T query tokens per sequence (1 in decode; a few when verifying drafts, each seeing the
positions up to its own) over the cached positions. For each KV head, the T * G query rows
(G = n_heads / n_kv_heads heads share it) are one tile [T * G padded to 16, D], so each K/V page
is read once for all of them, dequantized in registers, never written out.

    phase 1, grid (sequences, KV heads, splits): each program walks its run of pages:
        s = (q . k) * scale * log2(e)             (q rotated first when K is rotated)
        online softmax: m' = max(m, max s); l = l 2^(m-m') + sum 2^(s-m'); acc likewise
        acc += 2^(s-m') @ v                       (q8: per-row scales folded into s and p)
        when V is stored rotated, acc = R^T acc   (a Walsh-Hadamard transform, once a program)
    phase 2, grid (sequences x tokens, query heads, D / 32):
        out = sum_i 2^(m_i-M) acc_i / sum_i 2^(m_i-M) l_i, 32 of a head's D values a program.

Splitting the sequence over programs keeps the GPU full at batch 1 (8 KV heads would be 8
programs otherwise): Tri Dao's flash-decoding, FlashInfer's split-K decode.

The number of splits is fixed by the caller from the cache's capacity (or the sliding window's
span), never from the current length: each program reads the query positions (or the length)
from device memory and takes its share of the visible pages, so one launch can be captured in
a CUDA graph and replayed as the sequence grows; splits with no pages left store an empty
partial (m = -inf, l = 0) that the reduce weighs by zero. A sliding window (Gemma 3) both masks
the positions a query no longer sees and moves the first page read, so a windowed layer reads
about `window` positions whatever the length.

kivi4 keys (kv_kivi.py): the pages before the sequence's open page are sealed and read as
codes, dequantized with each channel's scale and min; the open page (the newest) from its f16
rows, keys and values (added after the sealed pages' sum is rotated back when V is rot4), by
the last split alone: the other splits share the sealed pages, so the program that reads the
open page reads no sealed page beside it (with the open page in a run of sealed ones, one
layer at 32k took 1.3-2.0 us longer on an H200: docs/decisions/2026-11-30-kivi4-key-reads.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.act_quant import store_quantized
from kernels.kv_kivi import kivi_page_scores, load_open_tile
from kernels.kv_tiles import KIVI4, Q8, ROT2, ROT4, fwht, load_rot4_halves, load_tile, rotate_rows
from kernels.kv_write import step_kv_rows, step_slots, store_k_rows, store_v_rows
from kernels.launch import gdc_launch_dependents, gdc_wait
from kernels.rope import rope_rows

LOG2E = 1.4426950408889634


# n_splits and window: one compiled kernel for every count (Triton would specialize a 1, and
# counts divisible by 16, into separate kernels)
@triton.jit(do_not_specialize=["n_splits", "window"])
def decode_split_kernel(
    q_ptr, acc_ptr, m_ptr, l_ptr,
    block_table_ptr, lengths_ptr, positions_ptr, signs_ptr,
    kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, vm_ptr, k_open_ptr, open_page_ptr, open_slots_ptr,
    qk_scale, stride_bt, stride_qt, n_splits, window,
    k_ptr, v_ptr, stride_kt, stride_vt, q_bias_ptr, k_bias_ptr, v_bias_ptr, inv_freq_ptr,
    mscale, table_pages,
    HQ: tl.constexpr, HKV: tl.constexpr, G: tl.constexpr, T: tl.constexpr,
    G_PAD: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr, P: tl.constexpr,
    K_FMT: tl.constexpr, V_FMT: tl.constexpr, POSITIONS: tl.constexpr,
    ASM: tl.constexpr = False, KG: tl.constexpr = 32,
    LAUNCH_DEPENDENTS: tl.constexpr = False, MASK_TAIL: tl.constexpr = False,
    WAIT_PRIOR: tl.constexpr = False, WRITE: tl.constexpr = False, ROPE: tl.constexpr = False,
    N_ROT: tl.constexpr = 2, NEOX: tl.constexpr = False, Q_BIAS: tl.constexpr = False,
    K_BIAS: tl.constexpr = False, V_BIAS: tl.constexpr = False,
):  # fmt: skip
    """Tile rows r = t * G + g: query token t and query head g of this KV head's group;
    G_PAD >= T * G. Token t sits at positions[seq, t] (POSITIONS) or else at the sequence's
    length - T + t; it sees the positions j <= its own, and with window > 0 only those with
    its position - j < window. Nothing here depends on a host-side length: the grid is fixed
    by the caller and each split takes its share of the pages that the queries can see.
    ASM: rot4 and q8 codes to f16 by inline assembly four bytes at a time (kernels/nibbles.py,
    a GPU), else the same values in plain operations (Triton's interpreter).
    kivi4 K: k_open_ptr the open pages, open_page_ptr their page numbers, open_slots_ptr each
    sequence's slot, KG positions per scale group. LAUNCH_DEPENDENTS (Hopper, launched with
    programmatic dependent launch): let the reduce kernel start now; it waits for this grid
    in-kernel (decode_reduce_kernel's WAIT_PRIMARY), so its launch overlaps this one's work.
    MASK_TAIL: the positions masked only on pages that some query row does not see
    whole (without a window: the pages past the lowest query position; decode: the last),
    not on every page. WAIT_PRIOR (AttentionTuning.chain_launches): launched as the previous
    launch's dependent (programmatic dependent launch), so wait for its grid before reading
    anything: whatever kernel wrote q or the newest K/V rows has finished. The launch and the
    programs' placement on the SMs then overlap the kernel before.

    WRITE (a decode step, T = 1, no head norms): the step's own row is written
    here, not by kv_write_kernel's launch before this one. q_ptr then holds the queries as the
    Q/K/V GEMV made them, and each program biases and rotates its G query heads (ROPE, Q_BIAS:
    kv_write's elementwise arithmetic, rounded to q's dtype as that launch stores them: the
    same bits); the program whose split holds the newest page computes the KV head's K and V
    row from k_ptr, v_ptr (step_kv_rows, as kv_write does) and stores it at the step's
    position (table_pages: the block table's length; a position past it writes nothing), then
    reads its pages, that row among them, after a barrier: it is the only program that reads
    the page. kivi4 K: the newest page is the open one (end_page - 1, not read from
    open_page_ptr, which this launch sets), its f16 rows read by the last split, which writes
    the row; the caller seals the page after the attention (PagedKVCache.attend)."""
    if LAUNCH_DEPENDENTS:
        gdc_launch_dependents()
    if WAIT_PRIOR:
        gdc_wait()
    seq = tl.program_id(0)
    head = tl.program_id(1)
    split = tl.program_id(2)
    gi = tl.arange(0, G_PAD)
    j = tl.arange(0, D)
    group_mask = gi < T * G
    token = gi // G
    q_rows = (seq * T + token) * HQ + head * G + gi % G
    if POSITIONS:
        position = tl.load(positions_ptr + seq * T + token, mask=group_mask, other=0)
        position = position.to(tl.int32)
    else:
        position = tl.load(lengths_ptr + seq) - T + token
    # the pages some query row can see: [first_page, end_page)
    end_page = tl.cdiv(tl.max(tl.where(group_mask, position, 0), axis=0) + 1, P)
    lowest = tl.min(tl.where(group_mask, position, 2**30), axis=0)
    first_page = tl.where(window > 0, tl.maximum(lowest - window + 1, 0) // P, 0)
    # pages before this one every query row sees whole (MASK_TAIL); a window masks them all
    whole_end = tl.where(window > 0, 0, (lowest + 1) // P)
    slot = 0
    if K_FMT == KIVI4:
        slot = tl.load(open_slots_ptr + seq)
        # the step's row, written below, is in the newest page: the open one (a compile-time
        # branch: Triton builds both sides of a conditional expression)
        if WRITE:  # noqa: SIM108
            open_page = end_page - 1
        else:
            open_page = tl.load(open_page_ptr + slot)
        # the open page (its f16 rows: more work than a sealed page) is the last split's
        # alone and the others share the sealed pages, so that no program reads both
        apart = n_splits > 1
        sealed_end = tl.minimum(end_page, open_page)
        pages_per_split = tl.cdiv(sealed_end - first_page, tl.where(apart, n_splits - 1, 1))
        first = first_page + split * pages_per_split
        last = tl.where(apart, tl.minimum(first + pages_per_split, sealed_end), end_page)
        own = apart & (split == n_splits - 1)
        first = tl.where(own, open_page, first)
        last = tl.where(own, end_page, last)
    else:
        pages_per_split = tl.cdiv(end_page - first_page, n_splits)
        first = first_page + split * pages_per_split
        last = tl.minimum(first + pages_per_split, end_page)
    # q's query tokens stride_qt apart (a speculative check's rows are views into the wider
    # output of the RoPE launch), each token's heads side by side
    q_at = (seq * T + token) * stride_qt + (head * G + gi % G) * D
    if WRITE:  # (the caller passes the step's position on the device: POSITIONS)
        pos = tl.load(positions_ptr + seq).to(tl.int32)
        q = rope_rows(q_ptr + q_at, group_mask, pos, inv_freq_ptr, mscale,
                      q_bias_ptr + (head * G + gi % G) * D, inv_freq_ptr, 0.0, D, N_ROT, NEOX,
                      Q_BIAS)  # fmt: skip
        q = q.to(q_ptr.dtype.element_ty).to(tl.float32)
        newest = pos // P
        if (newest >= first) & (newest < last):
            _write_step_row(seq, head, pos, block_table_ptr, stride_bt, table_pages, signs_ptr,
                            k_ptr + seq * stride_kt, v_ptr + seq * stride_vt, k_bias_ptr,
                            v_bias_ptr, inv_freq_ptr, mscale, kq_ptr, ks_ptr, km_ptr, vq_ptr,
                            vs_ptr, vm_ptr, k_open_ptr, open_page_ptr, slot, HKV, D, LOG2D, P,
                            K_FMT, V_FMT, ROPE, N_ROT, NEOX, K_BIAS, V_BIAS)  # fmt: skip
            tl.debug_barrier()  # the row stored before any thread reads its page
    else:
        q = tl.load(q_ptr + q_at[:, None] + j[None, :], mask=group_mask[:, None], other=0.0)
        q = q.to(tl.float32)
    if (K_FMT == ROT4) | (K_FMT == ROT2):  # keys stored rotated
        q = rotate_rows(q, tl.load(signs_ptr + j), G_PAD, D, LOG2D)
    q = (q * qk_scale).to(tl.float16)
    # rot4 and kivi4 K: q's even and odd dims apart, for the two halves of the key tile
    q_even, q_odd = tl.split(tl.reshape(q, (G_PAD, D // 2, 2)))

    m_i = tl.full((G_PAD,), float("-inf"), tl.float32)
    l_i = tl.zeros((G_PAD,), tl.float32)
    if V_FMT == ROT4:  # even and odd dims apart (see kv_tiles.load_rot4_halves)
        acc = tl.zeros((G_PAD, D // 2), tl.float32)
        acc_odd = tl.zeros((G_PAD, D // 2), tl.float32)
    else:
        acc = tl.zeros((G_PAD, D), tl.float32)
        acc_odd = tl.zeros((G_PAD, 1), tl.float32)  # unused
    loop_end = last
    if K_FMT == KIVI4:  # sealed pages in the loop, the open page after it
        loop_end = tl.minimum(last, open_page)
    for pg in range(first, loop_end):
        page = tl.maximum(tl.load(block_table_ptr + seq * stride_bt + pg), 0)  # -1: not grown
        row0 = (page * HKV + head) * P
        if K_FMT == ROT4:
            k_even, k_odd = load_rot4_halves(row0, kq_ptr, ks_ptr, km_ptr, P, D, ASM)
            s = tl.dot(q_odd, tl.trans(k_odd), tl.dot(q_even, tl.trans(k_even)))
        elif K_FMT == KIVI4:
            s = kivi_page_scores(q_even, q_odd, page, head, kq_ptr, ks_ptr, km_ptr, HKV, P, D, KG,
                                 ASM)  # fmt: skip
        else:
            k, k_scale = load_tile(row0, kq_ptr, ks_ptr, km_ptr, K_FMT, P, D, True, ASM)
            s = tl.dot(q, tl.trans(k))
            if K_FMT == Q8:
                s = s * k_scale[None, :]
        # a compile-time branch: Triton builds both sides of a conditional expression
        if MASK_TAIL:  # noqa: SIM108
            whole = pg < whole_end
        else:
            whole = False
        m_i, l_i, acc, acc_odd = _accumulate_page(
            s, pg, row0, position, window, m_i, l_i, acc, acc_odd, vq_ptr, vs_ptr, vm_ptr,
            V_FMT, P, D, ASM, whole,
        )  # fmt: skip
    if V_FMT == ROT4:  # the rows back from the rotated space, R^T acc = signs * (H acc)
        # (signs_ptr holds signs / sqrt(D)), so that the reduce is a plain weighted sum that
        # merges a head's D values apart; the halves joined first, not transformed apart
        # (docs/decisions/2026-12-01-attention-reduce-by-d-chunks.md)
        out = tl.reshape(tl.join(acc, acc_odd), (G_PAD, D))
        out = fwht(out, G_PAD, D, LOG2D) * tl.load(signs_ptr + j)[None, :]
    else:
        out = acc
    # a compile-time branch around a run-time one: Triton cannot join them with `and`
    if K_FMT == KIVI4:  # noqa: SIM102
        if (open_page >= first) & (open_page < last):  # the open page, K and V exact
            s = tl.dot(q, tl.trans(load_open_tile(slot, 0, head, k_open_ptr, HKV, P, D)))
            m_i, l_i, p, alpha = _softmax_step(s, open_page, position, window, m_i, l_i, P)
            v = load_open_tile(slot, 1, head, k_open_ptr, HKV, P, D)
            out = out * alpha[:, None] + tl.dot(p.to(tl.float16), v)

    part = q_rows * n_splits + split
    tl.store(m_ptr + part, m_i, mask=group_mask)
    tl.store(l_ptr + part, l_i, mask=group_mask)
    tl.store(acc_ptr + part[:, None] * D + j[None, :], out, mask=group_mask[:, None])


@triton.jit
def _write_step_row(seq, head, pos, block_table_ptr, stride_bt, table_pages, signs_ptr, k_row,
                    v_row, k_bias_ptr, v_bias_ptr, inv_freq_ptr, mscale, kq_ptr, ks_ptr,
                    km_ptr, vq_ptr, vs_ptr, vm_ptr, open_ptr, open_page_ptr, slot,
                    HKV: tl.constexpr, D: tl.constexpr, LOG2D: tl.constexpr, P: tl.constexpr,
                    K_FMT: tl.constexpr, V_FMT: tl.constexpr, ROPE: tl.constexpr,
                    N_ROT: tl.constexpr, NEOX: tl.constexpr, K_BIAS: tl.constexpr,
                    V_BIAS: tl.constexpr):  # fmt: skip
    """KV head `head`'s K and V of a decode step (the rows at k_row, v_row, as the GEMV made
    them) stored at position pos, as kv_write_kernel stores a step's row; kivi4 K: K and V as
    f16 into the sequence's open page (slot `slot`, its page number set), as its direct
    write does, V in its own format too (the page seals after the attention)."""
    heads = head + tl.arange(0, 1)
    rows, head_mask, in_table = step_slots(block_table_ptr + seq * stride_bt, pos, table_pages,
                                           heads, HKV, P)  # fmt: skip
    signs = tl.load(signs_ptr + tl.arange(0, D))
    k, v = step_kv_rows(k_row + heads * D, v_row + heads * D, heads, head_mask, pos,
                        inv_freq_ptr, mscale, k_bias_ptr, v_bias_ptr, inv_freq_ptr, 0.0, D,
                        ROPE, N_ROT, NEOX, K_BIAS, V_BIAS, False, True)  # fmt: skip
    if K_FMT == KIVI4:
        j = tl.arange(0, D)
        key_rows = ((slot * 2) * HKV + heads) * P + pos % P
        mask = head_mask[:, None]
        tl.store(open_ptr + key_rows[:, None] * D + j[None, :], k.to(tl.float16), mask=mask)
        tl.store(open_ptr + (key_rows + HKV * P)[:, None] * D + j[None, :], v.to(tl.float16),
                 mask=mask)  # fmt: skip
        tl.store(open_page_ptr + slot, pos // P, mask=in_table)
    else:
        store_k_rows(k, rows, head_mask, signs, kq_ptr, ks_ptr, km_ptr, K_FMT, 1, D, LOG2D)
    store_v_rows(v, rows, head_mask, signs, vq_ptr, vs_ptr, vm_ptr, V_FMT, 1, D, LOG2D)


@triton.jit
def _softmax_step(s, pg, position, window, m_i, l_i, P: tl.constexpr, whole=False):
    """Scores s [rows, P] of page pg into the online softmax: (m, l, p, alpha). whole: every
    row sees the whole page (no mask needed)."""
    if not whole:
        tokens = pg * P + tl.arange(0, P)
        behind = position[:, None] - tokens[None, :]
        visible = (behind >= 0) & ((window <= 0) | (behind < window))
        s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    # a row that sees no position of this page yet keeps m = -inf; 0 keeps 2^x finite
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_new = l_i * alpha + tl.sum(p, axis=1)
    return m_new, l_new, p, alpha


@triton.jit
def _accumulate_page(s, pg, row0, position, window, m_i, l_i, acc, acc_odd,
                     vq_ptr, vs_ptr, vm_ptr, V_FMT: tl.constexpr, P: tl.constexpr,
                     D: tl.constexpr, ASM: tl.constexpr, whole=False):  # fmt: skip
    """Scores s [rows, P] of page pg (its V rows from row0) into the online softmax."""
    m_i, l_i, p, alpha = _softmax_step(s, pg, position, window, m_i, l_i, P, whole)
    if V_FMT == ROT4:
        v_even, v_odd = load_rot4_halves(row0, vq_ptr, vs_ptr, vm_ptr, P, D, ASM, AT_LOAD=True)
        p16 = p.to(tl.float16)
        acc = acc * alpha[:, None] + tl.dot(p16, v_even)
        acc_odd = acc_odd * alpha[:, None] + tl.dot(p16, v_odd)
    else:
        v, v_scale = load_tile(row0, vq_ptr, vs_ptr, vm_ptr, V_FMT, P, D, True, ASM, AT_LOAD=True)
        if V_FMT == Q8:
            p = p * v_scale[None, :]
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
    return m_i, l_i, acc, acc_odd


@triton.jit
def decode_reduce_kernel(
    acc_ptr, m_ptr, l_ptr, out_ptr, sinks_ptr, xq_ptr, xd_ptr, xs_ptr, n_splits,
    HQ: tl.constexpr, D: tl.constexpr, DC: tl.constexpr, CHUNK: tl.constexpr,
    HAS_SINKS: tl.constexpr = False, WAIT_PRIMARY: tl.constexpr = False,
    LAUNCH_NEXT: tl.constexpr = False, QUANTIZE: tl.constexpr = False,
):  # fmt: skip
    """Grid (sequences x tokens, query heads, D // DC): a program merges DC of a query head's D
    values over its splits, CHUNK splits a step as one tile, with the online softmax's
    rescaling across steps: the loads of a step (m, l and the partial rows) do not wait on
    one another, so with every split in one step (the caller's CHUNK) the reduce is one round
    trip to memory. The partial rows are plain (the split kernel rotated rot4 V's back), so
    the head's D values merge apart, in D // DC programs that load at once. HAS_SINKS
    (gpt-oss): sinks_ptr holds one logit per query head, already times log2(e), that joins
    every softmax's denominator and no numerator (llama.cpp's soft_max with sinks). WAIT_PRIMARY:
    launched before the split kernel has finished (programmatic dependent launch), so first
    wait until its grid is done and its stores are visible. LAUNCH_NEXT: let the next launch
    on the stream start now (if it was launched as a dependent, it waits for this grid
    in-kernel: the split kernel's WAIT_PRIOR). QUANTIZE: also write the output in 8 bits
    (act_quant.store_quantized into xq/xd/xs, a QuantizedActivation of [rows, HQ * D]) for the
    integer GEMV of the attention output (wo): a program holds DC values, whole groups of 32
    (DC a multiple of 32), so no quantization launch of its own is needed."""
    if LAUNCH_NEXT:
        gdc_launch_dependents()
    if WAIT_PRIMARY:
        gdc_wait()
    row = tl.program_id(0) * HQ + tl.program_id(1)
    split = tl.arange(0, CHUNK)
    j = tl.program_id(2) * DC + tl.arange(0, DC)
    base = row * n_splits
    m_run = float("-inf")
    total = 0.0
    out = tl.zeros((DC,), tl.float32)
    for first in range(0, n_splits, CHUNK):
        mask = first + split < n_splits
        part = base + first + split
        m = tl.load(m_ptr + part, mask=mask, other=float("-inf"))
        l_part = tl.load(l_ptr + part, mask=mask, other=0.0)
        acc = tl.load(acc_ptr + part[:, None] * D + j[None, :], mask=mask[:, None], other=0.0)
        m_new = tl.maximum(m_run, tl.max(m, axis=0))
        # splits with no visible page keep m = -inf (weight 0); 0 keeps 2^x finite until one
        # split has seen a position
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        rescale = tl.exp2(m_run - m_safe)
        weight = tl.exp2(m - m_safe)
        total = total * rescale + tl.sum(weight * l_part, axis=0)
        out = out * rescale + tl.sum(weight[:, None] * acc, axis=0)
        m_run = m_new
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + tl.program_id(1))
        m_new = tl.maximum(m_run, sink)
        rescale = tl.exp2(m_run - m_new)
        total = total * rescale + tl.exp2(sink - m_new)
        out = out * rescale
    stored = (out / total).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + row * D + j, stored)
    if QUANTIZE:  # the values as stored (the GEMV would quantize those), this row's buffers
        k = HQ * D
        seq_row = tl.program_id(0)
        store_quantized(stored.to(tl.float32), tl.program_id(1) * D + tl.program_id(2) * DC, k,
                        xq_ptr + seq_row * (k // 4), xd_ptr + seq_row * (k // 32),
                        xs_ptr + seq_row * (k // 16), DC)  # fmt: skip
