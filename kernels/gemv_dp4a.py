"""Integer GEMV for 1..few input rows over Q4_K and Q6_K: 8-bit activations and dp4a (MMVQ).

    y[b, n] = sum over sub-blocks j of  d * sc_j * dx_j * sum_k q[n, k] xq[b, k]  (-  offsets)

x is quantized per 32 values (act_quant.py: int8 words, scale dx, sums), the weight planes are
read as int32 words, and each word's codes meet the matching x word in one `dp4a` (4
multiply-adds). Why: the float path (gemv_kquants.py) spends about 8.5 instructions per weight
turning nibbles into floats and is instruction-bound at 42-46% of the copy rate; here a word of
Q4_K codes costs two logic ops and two dp4a for 8 weights.

Q4_K: a 32-bit word at byte 32c + 4i of qs holds the low nibbles of weights 64c + 4i..4i+3
    (sub-block 2c) and the high nibbles of weights 64c + 32 + 4i.. (sub-block 2c + 1), so
    `w & 0x0F0F0F0F` and `(w >> 4) & 0x0F0F0F0F` meet x words 16c + i and 16c + 8 + i as they
    are. w = d sc q - dmin m gives, per sub-block, d sc dx sum(q xq) - dmin m dx sum(xq). The 12
    bytes of 6-bit scales are decoded from 3 words, as ggml's get_scale_min_k4 on 4 at a time.
Q6_K: per 128-weight half h, words i of ql (bytes 64h + 4i and 64h + 32 + 4i) and of qh (32h +
    4i) give 4 words of 6-bit codes: (ql & 0x0F0F0F0F) | ((qh << 4) & 0x30303030) and the like,
    for weights 128h + 32 quarter + 4i. w = d sc (q - 32) gives, per run of 16,
    d sc dx (sum(q xq) - 32 sum(xq)), all integer up to the last multiply.

The weight bytes are the GGUF bytes in PackedWeight's planes, unchanged.

Work: a tile is BLOCK_N weight rows x one input row x one split of K, numbered with the split
fastest, then the input row (so programs that read the same weights run together and all but
the first find them in L2), then the row tile; split-K partials are added in the same launch
(gemv_common.finish_rows). A program walks its tile in steps of NBLK super-blocks, each step's
weights loaded once the step before is computed. The flags, all constexpr:
    GDC       (sm_90+, a chained launch: kernels/launch.py) the kernel may start while the one
              before it runs: it loads its first weights, then waits before it reads x or
              writes anything; and it lets the next kernel start at once (EARLY_NEXT) or once
              its last step is computed.
    ONE_STEP  the whole grid is one step per program (a 4096-wide row at NBLK=16): no loop.
    RIT       weights and x are loaded as [groups, rows, ...] and permuted back
              (gemv_common.load_words), which Triton 3.6 lays out with threads along the
              groups and several rows of a group in each thread: x's words are loaded and held
              once for those rows instead of once per row (fewer registers, more programs an
              SM).
x comes in 8 bits from quantize_activation (or a norm or SwiGLU that wrote it so), loaded in
the weight tile's own layout. The variants measured and dropped (L2 prefetch, scales before
the wait, register caps, a persistent grid, explicit splits, weights a step ahead, x quantized
in every program) are in docs/decisions/.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.act_quant import dp4a, quantize_activation, x_words
from kernels.gemv_common import finish_rows, load_groups, load_words
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch

LOW_NIBBLES = tl.constexpr(0x0F0F0F0F)


@triton.jit
def q4_k_scales_from_words(s0, s1, s2, chunk):
    """(sc, m) of sub-blocks 2c and 2c + 1 from the 12 scale bytes as 3 int32 words s0..s2
    (ggml's get_scale_min_k4, four sub-blocks per operation)."""
    upper = chunk >= 2  # sub-blocks 4..7: low 4 bits in s2, top 2 bits in s0 / s1's bits 6..7
    sc4 = tl.where(upper, (s2 & LOW_NIBBLES) | ((s0 >> 2) & 0x30303030), s0 & 0x3F3F3F3F)
    m4 = tl.where(upper, ((s2 >> 4) & LOW_NIBBLES) | ((s1 >> 2) & 0x30303030), s1 & 0x3F3F3F3F)
    shift = (chunk % 2) * 16
    sc_lo = ((sc4 >> shift) & 0xFF).to(tl.float32)
    sc_hi = ((sc4 >> (shift + 8)) & 0xFF).to(tl.float32)
    m_lo = ((m4 >> shift) & 0xFF).to(tl.float32)
    m_hi = ((m4 >> (shift + 8)) & 0xFF).to(tl.float32)
    return sc_lo, sc_hi, m_lo, m_hi


@triton.jit
def dot_words(w, xw, ASM: tl.constexpr):
    """sum over the last two axes of dp4a(w [BN, G, S, 4], xw [1, G, S, 4]) -> [BN, G]"""
    return tl.sum(tl.sum(dp4a(w, xw, tl.zeros_like(w), ASM), axis=3), axis=2)


@triton.jit
def _step(s, steps_per_tile, n_splits, n_rows_x, blocks_per_split, N, NB, BLOCK_N: tl.constexpr,
          NBLK: tl.constexpr, PER: tl.constexpr, EVEN: tl.constexpr):  # fmt: skip
    """Where this program's step s lies (module docstring): (tile, split, input row b, weight
    rows [BN] and their mask, super-block blk [G] of each group and its mask), G = NBLK * PER
    groups (PER per super-block)."""
    t = tl.program_id(0) + (s // steps_per_tile) * tl.num_programs(0)
    k = (s % steps_per_tile) * NBLK  # the step's first super-block within the split
    split = t % n_splits
    tile = t // n_splits
    b = tile % n_rows_x
    rows = tile // n_rows_x * BLOCK_N + tl.arange(0, BLOCK_N)
    g = tl.arange(0, NBLK * PER) // PER
    blk = split * blocks_per_split + k + g
    group_mask = ((blk < NB) & (k + g < blocks_per_split)) | EVEN
    return tile, split, b, rows, (rows < N) | EVEN, blk, group_mask


@triton.jit
def _q4_k_load(d_ptr, dmin_ptr, scales_ptr, qs_ptr, rows, row_mask, blk, group_mask, NB,
               RIT: tl.constexpr):  # fmt: skip
    """One step's Q4_K planes for weight rows x groups (super-block blk, chunk g % 4):
    qs words [BN, G, 2, 4], d and dmin [BN, G] f32, scale words s0..s2 [BN, G]. RIT: the
    same tensors, loaded with several rows in a thread (gemv_common.load_words)."""
    chunk = tl.arange(0, blk.shape[0]) % 4
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    if RIT:
        row_blk = rows * NB
        qs = load_words(qs_ptr, row_blk * 32, (blk * 32 + chunk * 8)[:, None, None] + word[None],
                        row_mask, group_mask, RIT)  # fmt: skip
        d = load_groups(d_ptr, row_blk, blk, row_mask, group_mask, RIT).to(tl.float32)
        dmin = load_groups(dmin_ptr, row_blk, blk, row_mask, group_mask, RIT).to(tl.float32)
        s0 = load_groups(scales_ptr, row_blk * 3, blk * 3, row_mask, group_mask, RIT)
        s1 = load_groups(scales_ptr, row_blk * 3, blk * 3 + 1, row_mask, group_mask, RIT)
        s2 = load_groups(scales_ptr, row_blk * 3, blk * 3 + 2, row_mask, group_mask, RIT)
        return qs, d, dmin, s0, s1, s2
    mask2 = row_mask[:, None] & group_mask[None, :]
    return q4_k_load_at(d_ptr, dmin_ptr, scales_ptr, qs_ptr, rows[:, None] * NB + blk[None, :],
                        mask2)  # fmt: skip


@triton.jit
def q4_k_load_at(d_ptr, dmin_ptr, scales_ptr, qs_ptr, row_blk, mask2):
    """_q4_k_load's planes of super-blocks row_blk [BN, G] (row * NB + block; chunk g % 4 of
    each), masked by mask2 [BN, G]: for callers whose groups come from several rows."""
    chunk = tl.arange(0, row_blk.shape[1]) % 4
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    qs = tl.load(qs_ptr + (row_blk * 32 + chunk[None, :] * 8)[:, :, None, None] + word,
                 mask=mask2[:, :, None, None], other=0)  # fmt: skip
    d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
    dmin = tl.load(dmin_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
    s0 = tl.load(scales_ptr + row_blk * 3, mask=mask2, other=0)
    s1 = tl.load(scales_ptr + row_blk * 3 + 1, mask=mask2, other=0)
    s2 = tl.load(scales_ptr + row_blk * 3 + 2, mask=mask2, other=0)
    return qs, d, dmin, s0, s1, s2


@triton.jit
def _q4_k_mac(acc, planes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM: tl.constexpr,
              RIT: tl.constexpr):  # fmt: skip
    """acc [BN, G] += one step of d sc dx sum(q xq) - dmin m dx sum(xq), per sub-block."""
    qs, d, dmin, s0, s1, s2 = planes
    chunk = tl.arange(0, blk.shape[0]) % 4
    sc_lo, sc_hi, m_lo, m_hi = q4_k_scales_from_words(s0, s1, s2, chunk[None, :])
    base = blk * 64 + chunk * 16
    x_lo, dx_lo, isum_lo = x_words(xq_row, xd_row, xs_row, base, group_mask, rows, RIT)
    x_hi, dx_hi, isum_hi = x_words(xq_row, xd_row, xs_row, base + 8, group_mask, rows, RIT)
    sum_lo = dx_lo * tl.sum(isum_lo, axis=2).to(tl.float32)  # sum of x' over the sub-block
    sum_hi = dx_hi * tl.sum(isum_hi, axis=2).to(tl.float32)
    dot_lo = dot_words(qs & LOW_NIBBLES, x_lo, ASM)
    dot_hi = dot_words((qs >> 4) & LOW_NIBBLES, x_hi, ASM)
    scaled = (sc_lo * dx_lo) * dot_lo.to(tl.float32) + (sc_hi * dx_hi) * dot_hi.to(tl.float32)
    return acc + d * scaled - dmin * (m_lo * sum_lo + m_hi * sum_hi)


@triton.jit
def _q6_k_load(ql_ptr, qh_ptr, sc_words_ptr, d_ptr, rows, row_mask, blk, group_mask, NB,
               RIT: tl.constexpr):  # fmt: skip
    """One step's Q6_K planes for weight rows x groups (super-block blk, half g % 2): ql
    words of the half's two 32-byte runs, qh words [BN, G, 2, 4], d [BN, G] f32, and the
    half's 8 int8 scales as 2 words [BN, G]. RIT: as _q4_k_load's."""
    half = tl.arange(0, blk.shape[0]) % 2
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    if RIT:
        row_blk = rows * NB
        ql_words = (blk * 32 + half * 16)[:, None, None] + word[None]
        ql_a = load_words(ql_ptr, row_blk * 32, ql_words, row_mask, group_mask, RIT)
        ql_b = load_words(ql_ptr, row_blk * 32, ql_words + 8, row_mask, group_mask, RIT)
        qh = load_words(qh_ptr, row_blk * 16, (blk * 16 + half * 8)[:, None, None] + word[None],
                        row_mask, group_mask, RIT)  # fmt: skip
        d = load_groups(d_ptr, row_blk, blk, row_mask, group_mask, RIT).to(tl.float32)
        sw0 = load_groups(sc_words_ptr, row_blk * 4, blk * 4 + half * 2, row_mask, group_mask,
                          RIT)  # fmt: skip
        sw1 = load_groups(sc_words_ptr, row_blk * 4, blk * 4 + half * 2 + 1, row_mask,
                          group_mask, RIT)  # fmt: skip
        return ql_a, ql_b, qh, d, sw0, sw1
    mask2 = row_mask[:, None] & group_mask[None, :]
    return q6_k_load_at(ql_ptr, qh_ptr, sc_words_ptr, d_ptr, rows[:, None] * NB + blk[None, :],
                        mask2)  # fmt: skip


@triton.jit
def q6_k_load_at(ql_ptr, qh_ptr, sc_words_ptr, d_ptr, row_blk, mask2):
    """_q6_k_load's planes of super-blocks row_blk [BN, G] (row * NB + block; half g % 2 of
    each), masked by mask2 [BN, G]: for callers whose groups come from several rows."""
    half = tl.arange(0, row_blk.shape[1]) % 2
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    mask4 = mask2[:, :, None, None]
    ql_words = (row_blk * 32 + half[None, :] * 16)[:, :, None, None] + word
    ql_a = tl.load(ql_ptr + ql_words, mask=mask4, other=0)
    ql_b = tl.load(ql_ptr + ql_words + 8, mask=mask4, other=0)
    qh = tl.load(qh_ptr + (row_blk * 16 + half[None, :] * 8)[:, :, None, None] + word,
                 mask=mask4, other=0)  # fmt: skip
    d = tl.load(d_ptr + row_blk, mask=mask2, other=0.0).to(tl.float32)
    sw0 = tl.load(sc_words_ptr + row_blk * 4 + half[None, :] * 2, mask=mask2, other=0)
    sw1 = tl.load(sc_words_ptr + row_blk * 4 + half[None, :] * 2 + 1, mask=mask2, other=0)
    return ql_a, ql_b, qh, d, sw0, sw1


@triton.jit
def _q6_k_mac(acc, planes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM: tl.constexpr,
              RIT: tl.constexpr):  # fmt: skip
    """acc [BN, G] += one step of d sc dx (sum(q xq) - 32 sum(xq)), per run of 16."""
    ql_a, ql_b, qh, d, sw0, sw1 = planes
    half = tl.arange(0, blk.shape[0]) % 2
    run = tl.arange(0, 2)  # which 16 of a quarter's 32 weights (one scale each)
    base = blk * 64 + half * 32
    total = tl.zeros(acc.shape, dtype=tl.float32)
    for quarter in tl.static_range(4):
        # the 4 quarters of a half: low / high nibbles of ql_a / ql_b, qh bits 2*quarter..
        if quarter % 2 == 0:  # noqa: SIM108 (a static if; Triton's ternary is not one)
            ql = ql_a
        else:
            ql = ql_b
        if quarter >= 2:
            ql = ql >> 4
        codes = (ql & LOW_NIBBLES) | (((qh >> (2 * quarter)) << 4) & 0x30303030)
        xq, dx, isum = x_words(xq_row, xd_row, xs_row, base + 8 * quarter, group_mask, rows, RIT)
        dot = tl.sum(dp4a(codes, xq, tl.zeros_like(codes), ASM), axis=3)  # [BN, NG, 2]
        # scales 8h + 2 quarter + run: bytes 2 (quarter % 2) + run of word quarter // 2
        if quarter < 2:  # noqa: SIM108 (a static if)
            sw = sw0
        else:
            sw = sw1
        shift = 24 - 8 * (2 * (quarter % 2) + run)
        sc = (sw[:, :, None] << shift[None, None, :]) >> 24  # sign-extended int8
        runs = (dot - 32 * isum) * sc
        total += dx * tl.sum(runs, axis=2).to(tl.float32)
    return acc + d * total


@triton.jit
def load_planes(p0, p1, p2, p3, rows, row_mask, blk, group_mask, NB, Q6: tl.constexpr,
                RIT: tl.constexpr):  # fmt: skip
    """One step's weight planes, the format's six tensors."""
    if Q6:
        planes = _q6_k_load(p0, p1, p2, p3, rows, row_mask, blk, group_mask, NB, RIT)
    else:
        planes = _q4_k_load(p0, p1, p2, p3, rows, row_mask, blk, group_mask, NB, RIT)
    return planes


@triton.jit
def mac_step(acc, planes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM: tl.constexpr,
             Q6: tl.constexpr, RIT: tl.constexpr):  # fmt: skip
    """acc += one step of the format's integer dot products, scaled."""
    if Q6:
        acc = _q6_k_mac(acc, planes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM, RIT)
    else:
        acc = _q4_k_mac(acc, planes, blk, group_mask, rows, xq_row, xd_row, xs_row, ASM, RIT)
    return acc


@triton.jit
def dp4a_gemv_kernel(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3,
    N, NB, n_rows_x, stride_ob, blocks_per_split, n_splits, n_tiles, steps_per_tile,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    Q6: tl.constexpr, ONE_STEP: tl.constexpr, GDC: tl.constexpr, EARLY_NEXT: tl.constexpr,
    ASM: tl.constexpr, RIT: tl.constexpr = False,
):  # fmt: skip
    """The planes p0..p3: Q4_K d, dmin (f16), scales, qs (int32 words); Q6_K ql, qh, scales
    (int32 words), d (f16). x: quantize_activation's words, scales and sums. steps_per_tile =
    cdiv(blocks_per_split, NBLK), an argument so that Triton's specialization of 1 folds the
    divisions by it away. The flags: module docstring."""
    gemv_program(xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3, N, NB,
                 n_rows_x, stride_ob, blocks_per_split, n_splits, n_tiles, steps_per_tile,
                 BLOCK_N, NBLK, EVEN, SPLIT_K, Q6, ONE_STEP, GDC, EARLY_NEXT, ASM,
                 RIT)  # fmt: skip


@triton.jit
def gemv_program(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3,
    N, NB, n_rows_x, stride_ob, blocks_per_split, n_splits, n_tiles, steps_per_tile,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    Q6: tl.constexpr, ONE_STEP: tl.constexpr, GDC: tl.constexpr, EARLY_NEXT: tl.constexpr,
    ASM: tl.constexpr, RIT: tl.constexpr,
):  # fmt: skip
    """dp4a_gemv_kernel's program (programs 0..n_tiles - 1 of a launch of at least n_tiles:
    kernels/router_beside_wo.py's launch adds programs of its own after them). (A step's six
    plane tensors are kept as six names, not a tuple, so the loop carries them as plain
    values.)"""
    PER: tl.constexpr = 2 if Q6 else 4  # groups per super-block (Q6_K halves, Q4_K chunks)
    NG: tl.constexpr = NBLK * PER
    n_steps = tl.cdiv(n_tiles - tl.program_id(0), tl.num_programs(0)) * steps_per_tile
    tile, split, b, rows, row_mask, blk, group_mask = _step(
        0, steps_per_tile, n_splits, n_rows_x, blocks_per_split, N, NB, BLOCK_N, NBLK, PER, EVEN
    )
    w0, w1, w2, w3, w4, w5 = load_planes(p0, p1, p2, p3, rows, row_mask, blk, group_mask, NB,
                                         Q6, RIT)  # fmt: skip
    if GDC:
        if EARLY_NEXT:
            gdc_launch_dependents()
        gdc_wait()
    acc = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
    if ONE_STEP:
        xq_row, xd_row, xs_row = xq_ptr + b * NB * 64, xd_ptr + b * NB * 8, xs_ptr + b * NB * 16
        acc = mac_step(acc, (w0, w1, w2, w3, w4, w5), blk, group_mask, rows, xq_row, xd_row,
                       xs_row, ASM, Q6, RIT)  # fmt: skip
        if GDC and not EARLY_NEXT:
            gdc_launch_dependents()
        finish_rows(tl.sum(acc, axis=1), out_ptr, part_ptr, count_ptr, tile, split, b, rows,
                    row_mask, stride_ob, N, n_rows_x, n_splits, SPLIT_K)  # fmt: skip
    else:
        for s in range(n_steps):
            # the next step's place; past the last step, the last again (its loads masked off)
            tile_n, split_n, b_n, rows_n, row_mask_n, blk_n, group_mask_n = _step(
                tl.minimum(s + 1, n_steps - 1), steps_per_tile, n_splits, n_rows_x,
                blocks_per_split, N, NB, BLOCK_N, NBLK, PER, EVEN,
            )  # fmt: skip
            xq_row, xd_row = xq_ptr + b * NB * 64, xd_ptr + b * NB * 8
            xs_row = xs_ptr + b * NB * 16
            acc = mac_step(acc, (w0, w1, w2, w3, w4, w5), blk, group_mask, rows, xq_row,
                           xd_row, xs_row, ASM, Q6, RIT)  # fmt: skip
            # the next step's weights, none past the last step
            u0, u1, u2, u3, u4, u5 = load_planes(p0, p1, p2, p3, rows_n, row_mask_n, blk_n,
                                                 group_mask_n & (s + 1 < n_steps), NB, Q6,
                                                 RIT)  # fmt: skip
            if (s + 1) % steps_per_tile == 0:  # the tile's last step
                if GDC and not EARLY_NEXT:  # noqa: SIM102 (a static if around a runtime one)
                    if s + 1 == n_steps:
                        gdc_launch_dependents()
                finish_rows(tl.sum(acc, axis=1), out_ptr, part_ptr, count_ptr, tile, split, b,
                            rows, row_mask, stride_ob, N, n_rows_x, n_splits, SPLIT_K)  # fmt: skip
                acc = tl.zeros((BLOCK_N, NG), dtype=tl.float32)
            w0, w1, w2, w3, w4, w5 = u0, u1, u2, u3, u4, u5
            tile, split, b, rows, row_mask = tile_n, split_n, b_n, rows_n, row_mask_n
            blk, group_mask = blk_n, group_mask_n


def words(plane: torch.Tensor) -> torch.Tensor:
    """A uint8 plane (rows of whole 4-byte words) read as int32 words."""
    return plane.view(-1).view(torch.int32)


def plane_args(w) -> tuple[torch.Tensor, ...]:
    """The kernel's p0..p3 for a Q4_K or Q6_K PackedWeight."""
    p = w.planes
    if w.fmt.name == "Q6_K":
        return words(p["ql"]), words(p["qh"]), words(p["scales"]), p["d"]
    return p["d"], p["dmin"], words(p["scales"]), words(p["qs"])


def launch(w, x, xq, out, part, count, plan, cfg) -> None:
    """One launch over every tile of plan (split-K) for x [B, K] (xq: x's 8-bit form or None:
    quantized here, in a launch of its own)."""
    n_tiles, args, flags = launch_args(w, x, xq, out, part, count, plan, cfg)
    dp4a_gemv_kernel[(n_tiles,)](*args, **flags)


def launch_args(w, x, xq, out, part, count, plan, cfg) -> tuple[int, tuple, dict]:
    """launch's (programs, arguments, flags) for dp4a_gemv_kernel, or gemv_program in a
    kernel of more programs (kernels/router_beside_wo.py)."""
    n_tiles = triton.cdiv(w.n_out, cfg.block_n) * x.shape[0] * plan.splits
    gdc = cfg.chained and has_dependent_launch(x.device)
    xq = xq or quantize_activation(x, let_next_start=gdc)
    extra = {"launch_pdl": True} if gdc else {}
    args = (
        xq.words, xq.scales, xq.sums, out, part, count, *plane_args(w),
        w.n_out, w.n_in // 256, x.shape[0], out.stride(0), plan.blocks_per_split,
        plan.splits, n_tiles, triton.cdiv(plan.blocks_per_split, cfg.blocks_per_tile),
    )  # fmt: skip
    flags = dict(
        BLOCK_N=cfg.block_n, NBLK=cfg.blocks_per_tile, EVEN=plan.even,
        SPLIT_K=plan.splits > 1, Q6=w.fmt.name == "Q6_K",
        ONE_STEP=plan.blocks_per_split <= cfg.blocks_per_tile, GDC=gdc,
        EARLY_NEXT=cfg.early_next, ASM=plan.native, RIT=cfg.rows_in_thread,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **extra,
    )  # fmt: skip
    return n_tiles, args, flags
