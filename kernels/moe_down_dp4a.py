"""The expert down of a one-token step as one integer GEMV over its k experts' rows side by
side: h (the gate/up's output, [k, n_ff]) is one row of k n_ff values in 8 bits, and output
row r of the down is the dot product of that row with the k weight rows e_s n_out + r, one per
slot, scaled by each slot's routing weight:

    out[r] = sum_s weights[s] (Wd[e_s][r] . h[s])                      e_s = ids[0, s]

The arithmetic is the dense integer GEMV's (gemv_dp4a.py: dp4a over the GGUF words, the
format's scales per sub-block), only the super-blocks' rows are looked up by slot: virtual
super-block j of row r is super-block j mod NB of row e_{j div NB} n_out + r (NB super-blocks
to an expert's row). Each program takes BLOCK_N output rows and all k NB super-blocks of
them, as two chunks of powers of two (Qwen3-30B-A3B's 24 as 16 and 8, none masked), both
loaded before the wait: every weight load in flight at once, as the dense GEMV's one-step
tiles, and many small programs an SM where moe_one_token.py holds one of 8 warps. h comes in
8 bits from quantize_activation (k n_ff a multiple of 32); each slot's routing weight scales
its groups' sums.

Q4_K and Q6_K (the integer GEMV's formats), n_ff a multiple of 256 (whole super-blocks).
Dependent launch (sm_90+): a program loads its ids and its weights, then waits for the kernel
before it (the quantization of h) before it reads h and the routing weights. The ids come
from wo's launch, which had ended before the gate/up was let in; the routing weights from the
FFN norm, which a gate/up that lets this launch in at its start (early_next) may not have
waited for yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.gemv_dp4a import mac_step, plane_args, q4_k_load_at, q6_k_load_at
from kernels.launch import gdc_launch_dependents, gdc_wait

FORMATS = ("Q4_K", "Q6_K")


@triton.jit
def _chunk(p0, p1, p2, p3, ids_ptr, rows, row_mask, N, NB, TOP_K, FIRST: tl.constexpr,
           NBLK: tl.constexpr, Q6: tl.constexpr):  # fmt: skip
    """Virtual super-blocks FIRST .. FIRST + NBLK of the rows (those past TOP_K NB masked
    off): (their planes, the virtual super-block of each group and its mask)."""
    PER: tl.constexpr = 2 if Q6 else 4  # groups a super-block (Q6_K halves, Q4_K chunks)
    blk = FIRST + tl.arange(0, NBLK * PER) // PER
    group_mask = blk < TOP_K * NB
    slot = blk // NB
    expert = tl.load(ids_ptr + slot, mask=group_mask, other=0).to(tl.int64)
    row_blk = (expert[None, :] * N + rows[:, None]) * NB + (blk % NB)[None, :]
    mask2 = row_mask[:, None] & group_mask[None, :]
    if Q6:
        planes = q6_k_load_at(p0, p1, p2, p3, row_blk, mask2)
    else:
        planes = q4_k_load_at(p0, p1, p2, p3, row_blk, mask2)
    return planes, blk, group_mask


@triton.jit
def _chunk_sum(planes, blk, group_mask, weights_ptr, NB, rows, xq_ptr, xd_ptr, xs_ptr,
               Q6: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """The rows' dot products over a chunk's super-blocks, each group weighted by its slot's
    routing weight (read here, after the wait: the norm two launches back wrote them, and
    with the gate/up's early start this launch may begin before that norm ends): [BLOCK_N]."""
    scale = tl.load(weights_ptr + blk // NB, mask=group_mask, other=0.0)
    acc = tl.zeros((rows.shape[0], blk.shape[0]), dtype=tl.float32)
    acc = mac_step(acc, planes, blk, group_mask, rows, xq_ptr, xd_ptr, xs_ptr, ASM, Q6, False)
    return tl.sum(acc * scale[None, :], axis=1)


@triton.jit
def _down_kernel(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, p0, p1, p2, p3, ids_ptr, weights_ptr, N, NB, TOP_K,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, NBLK_REST: tl.constexpr, Q6: tl.constexpr,
    GDC: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """Rows tile*BLOCK_N.. of out [1, N]. The TOP_K NB virtual super-blocks in two chunks,
    each a power of two (split_blocks): NBLK, then NBLK_REST (0: none), both loaded before the
    wait. Planes p0..p3 as gemv_dp4a's (Q4_K d, dmin, scales, qs; Q6_K ql, qh, scales, d) of
    the [n_expert N, NB 256] matrix."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    planes, blk, group_mask = _chunk(p0, p1, p2, p3, ids_ptr, rows, row_mask, N, NB, TOP_K, 0,
                                     NBLK, Q6)  # fmt: skip
    if NBLK_REST > 0:
        planes_r, blk_r, group_mask_r = _chunk(p0, p1, p2, p3, ids_ptr, rows, row_mask, N, NB,
                                               TOP_K, NBLK, NBLK_REST, Q6)  # fmt: skip
    if GDC:
        gdc_wait()
    y = _chunk_sum(planes, blk, group_mask, weights_ptr, NB, rows, xq_ptr, xd_ptr, xs_ptr, Q6,
                   ASM)  # fmt: skip
    if NBLK_REST > 0:
        y += _chunk_sum(planes_r, blk_r, group_mask_r, weights_ptr, NB, rows, xq_ptr, xd_ptr,
                        xs_ptr, Q6, ASM)  # fmt: skip
    if GDC:
        gdc_launch_dependents()
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)


def split_blocks(n: int) -> tuple[int, int]:
    """n super-blocks as two chunks of powers of two: the largest that fits, then the rest
    padded (0 where none is left): Qwen3-30B-A3B's 8 x 3 = 24 as 16 and 8."""
    first = 1 << (n.bit_length() - 1)
    rest = n - first
    return first, triton.next_power_of_2(rest) if rest else 0


def takes(fmt: str, n_in: int) -> bool:
    """Whether this kernel serves a down of these experts: the integer GEMV's formats, whole
    super-blocks a row (so h's k rows are whole groups of 32 for quantize_activation)."""
    return fmt in FORMATS and n_in % 256 == 0


def launch_down(hq, w, routing, out_dtype: torch.dtype, block_n: int, num_warps: int, asm: bool,
                gdc: bool) -> torch.Tensor:  # fmt: skip
    """out [1, n_out]: hq h's k rows as one 8-bit row (quantize_activation of h [1, k n_ff]),
    w the down's ExpertWeight, routing a one-token ExpertRouting with its weights."""
    packed = w.packed
    nb = w.n_in // 256
    first, rest = split_blocks(routing.top_k * nb)
    out = torch.empty(1, w.n_out, dtype=out_dtype, device=hq.words.device)
    extra = {"launch_pdl": True} if gdc else {}
    _down_kernel[(triton.cdiv(w.n_out, block_n),)](
        hq.words, hq.scales, hq.sums, out, *plane_args(packed), routing.ids, routing.weights,
        w.n_out, nb, routing.top_k, BLOCK_N=block_n, NBLK=first, NBLK_REST=rest,
        Q6=packed.fmt.name == "Q6_K",
        GDC=gdc, ASM=asm, num_warps=num_warps, **extra,
    )  # fmt: skip
    return out
