"""8-bit activations for the integer GEMV: x quantized per 32 values into int8 words, and dp4a.

    d = max|x| / 127 over a group of 32 values,  q = round(x / d) in [-127, 127]
    x . w  ~=  d * sum(q * w)       (w's integer codes; the sums are exact in int32)

This is what llama.cpp's CUDA (q8_1, MMVQ) and CPU (q8_K) builds do to the activation before
their integer dot products. The error it adds is 0.3-0.9% of a dot product on the tests' random
weights (relative to the float64 product; each x is rounded to 1/254 of its group's range).

Four consecutive int8 values are packed little-endian into one int32 word, so that a word of a
weight plane (4 codes of 4 consecutive weights, one per byte) meets its 4 inputs in one `dp4a`:
4 multiply-adds in one instruction. Rounding uses the magic-number trick: the float32 bits of
v + 1.5 * 2^23 are 0x4B400000 + round(v) (nearest, ties to even) for |v| < 2^22, so the low byte
is q as a two's-complement byte, without the float-to-int unit (a quarter-rate instruction).

Two ways to feed a GEMV (gemv_dp4a.py): `quantize_activation` does it once, in a small kernel of
its own, and the GEMV loads words, scales and sums in its weight tile's layout; or the kernel
that produces x writes it in 8 bits as well (`store_quantized`, used by kernels/norms.py and
kernels/activations.py), in the same buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.errors import UnsupportedTensor
from kernels.gemv_common import load_groups, load_runs, load_words
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch

# the name engine/hearth/ops.py asks for; kernels/launch.py has the one check
has_griddepcontrol = has_dependent_launch

ROUND_MAGIC = tl.constexpr(12582912.0)  # 1.5 * 2**23
ROUND_BITS = tl.constexpr(0x4B400000)  # its float32 bits


@triton.jit
def dp4a(a, b, c, ASM: tl.constexpr, SIGNED: tl.constexpr = False):
    """c + sum over the 4 bytes i of a[i] * b[i] (signed); a's bytes unsigned, or signed with
    SIGNED (Q8_0's codes); int32 tensors of one shape.

    ASM=False is the same sum in plain integer arithmetic, for Triton's CPU interpreter (inline
    assembly does not run there); the gpu-marked tests check that both agree."""
    if ASM:
        if SIGNED:
            return tl.inline_asm_elementwise(
                "dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32,
                is_pure=True, pack=1,
            )  # fmt: skip
        return tl.inline_asm_elementwise(
            "dp4a.u32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32,
            is_pure=True, pack=1,
        )  # fmt: skip
    else:
        total = c
        for i in tl.static_range(4):
            if SIGNED:  # noqa: SIM108 (a static if; Triton has no constexpr ternary)
                a_byte = (a << (24 - 8 * i)) >> 24
            else:
                a_byte = (a >> (8 * i)) & 0xFF
            total += a_byte * ((b << (24 - 8 * i)) >> 24)
        return total


@triton.jit
def quantize_values(x):
    """x [G, 2, 4, 4] float32 (groups of 32 values in order) -> (packed int8 words [G, 2, 4]
    int32, d [G] float32, the sum of q per run of 16 values [G, 2] int32). Every kernel that
    quantizes calls it (this module's, the fused RMSNorm and SwiGLU) or its two steps,
    inverse_scale and rounded_words (the expert down's prologue, kernels/moe_gemv.py), so
    their codes and scales are the same bits for the same values."""
    amax = tl.max(tl.max(tl.max(tl.abs(x), axis=3), axis=2), axis=1)  # [G]
    packed, isum = rounded_words(x, inverse_scale(amax)[:, None, None, None])
    return packed, amax * (1.0 / 127.0), isum


@triton.jit
def inverse_scale(amax):
    """1 / d = 127 / max|x| of a group, correctly rounded, as numpy's (Triton's `/` is an
    approximate division); amax = 0: all x are 0 and so is every q."""
    return tl.math.div_rn(127.0, tl.maximum(amax, 1e-30))


@triton.jit
def rounded_words(x, inv):
    """x [A, B, 4, 4] float32 (words of 4 values) times inv (1 / d of each value's group,
    broadcast to x) rounded to int8 codes -> (the codes packed 4 to an int32 word [A, B, 4],
    the sum of the codes over each [4, 4] [A, B] int32: a run of 16). Every quantizer's
    rounding (quantize_values, the expert down's prologue in kernels/moe_gemv.py)."""
    j = tl.arange(0, 4)
    # one explicit fma (one rounding on the GPU), the same in every kernel that rounds
    bits = tl.fma(x, inv, ROUND_MAGIC).to(tl.int32, bitcast=True)
    q = bits - ROUND_BITS  # round(x / d), -127..127
    packed = tl.sum((bits & 0xFF) << (8 * j[None, None, None, :]), axis=3)
    return packed, tl.sum(tl.sum(q, axis=3), axis=2)


@triton.jit
def quantize_words(x_ptr, words, mask):
    """Quantize the values of x at word indices `words` [G, S, 4] (value 4 * word + j), one
    scale per group of S * 4 * 4 = 32 values (S = 2); x_ptr points at the input row; mask
    [G, S, 4] (False reads 0). Returns (packed int8 words [G, S, 4] int32, d [G] float32, the
    sum of q per run of 16 values [G, S] int32). The dot products then use x' = d q exactly
    (also for the offsets), so a kernel computes x' @ W.T up to float32 rounding
    (kernels.reference.quantize_activation)."""
    j = tl.arange(0, 4)
    x = tl.load(x_ptr + words[:, :, :, None] * 4 + j[None, None, None, :],
                mask=mask[:, :, :, None], other=0.0).to(tl.float32)  # fmt: skip
    return quantize_values(x)


@triton.jit
def store_quantized(values, first, n, xq_ptr, xd_ptr, xs_ptr, BLOCK: tl.constexpr):
    """Quantize `values` [BLOCK] (float32; BLOCK a multiple of 32) that sit at flat positions
    first .. first + BLOCK - 1 of an x of n values (first and n multiples of 32; positions
    past n are not stored) and store them as `quantize_activation` does. For kernels that
    produce a GEMV's input: they quantize it in registers instead of a launch of their own."""
    G: tl.constexpr = BLOCK // 32
    packed, d, isum = quantize_values(tl.reshape(values, (G, 2, 4, 4)))
    g = first // 32 + tl.arange(0, G)
    in_x = g < n // 32
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    tl.store(xq_ptr + g[:, None, None] * 8 + word[None], packed,
             mask=in_x[:, None, None] & (word[None] >= 0))  # fmt: skip
    tl.store(xd_ptr + g, d, mask=in_x)
    run = tl.arange(0, 2)
    tl.store(xs_ptr + g[:, None] * 2 + run[None, :], isum, mask=in_x[:, None] & (run[None] >= 0))


@triton.jit
def x_words(xq_row, xd_row, xs_row, base, group_mask, rows, RIT: tl.constexpr = False):
    """x's int8 words base[g] + [0, 8) for groups g of 32 values (base [G], a multiple of 8),
    with d [BN, G] and the sums of q per 16 [BN, G, 2], loaded from `quantize_activation`'s
    buffers as [BN, G, 2, 4] in the weight tile's own layout (rows [BN] give the shape: every
    thread loads the words its weights meet, from L1, with no shuffle through shared memory);
    RIT: as the weights are loaded with gemv_common.load_words' RIT, so the layouts match."""
    run = tl.arange(0, 2)
    word = run[:, None] * 4 + tl.arange(0, 4)[None, :]
    words = base[:, None, None] + word[None]
    zero = rows * 0
    runs = (base // 4)[:, None] + run[None, :]
    if RIT:  # loaded as the weights are with RIT (gemv_common.load_words)
        every_row = zero == 0
        packed = load_words(xq_row, zero, words, every_row, group_mask, RIT)
        d = load_groups(xd_row, zero, base // 8, every_row, group_mask, RIT)
        isum = load_runs(xs_row, zero, runs, every_row, group_mask, RIT)
        return packed, d, isum
    mask = group_mask[:, None, None] & (word[None] >= 0)
    packed = tl.load(xq_row + zero[:, None, None, None] + words[None], mask=mask[None], other=0)
    d = tl.load(xd_row + zero[:, None] + (base // 8)[None, :], mask=group_mask[None, :],
                other=0.0)  # fmt: skip
    run_mask = group_mask[None, :, None] & (run[None, None, :] >= 0)
    isum = tl.load(xs_row + zero[:, None, None] + runs[None], mask=run_mask, other=0)
    return packed, d, isum


@triton.jit
def quantize_kernel(x_ptr, xq_ptr, xd_ptr, xs_ptr, n_groups, stride_xb, GROUPS: tl.constexpr,
                    LET_NEXT_START: tl.constexpr, WAIT_PRIOR: tl.constexpr = False):  # fmt: skip
    """x [B, K] -> words xq [B, K/4] int32, d xd [B, K/32] f32, sums xs [B, K/16] int32.
    LET_NEXT_START (sm_90+): a GEMV launched after it with launch_pdl may start at once (it
    streams its weights and waits for these words with griddepcontrol.wait). WAIT_PRIOR:
    launched as the kernel before's dependent (launch_pdl), so x only after its grid ends."""
    if LET_NEXT_START:
        gdc_launch_dependents()
    if WAIT_PRIOR:
        gdc_wait()
    b = tl.program_id(1)
    g = tl.program_id(0) * GROUPS + tl.arange(0, GROUPS)
    word = tl.arange(0, 2)[:, None] * 4 + tl.arange(0, 4)[None, :]
    words = g[:, None, None] * 8 + word[None]
    mask = (g < n_groups)[:, None, None] & (word[None] >= 0)
    packed, d, isum = quantize_words(x_ptr + b * stride_xb, words, mask)
    tl.store(xq_ptr + b * n_groups * 8 + words, packed, mask=mask)
    tl.store(xd_ptr + b * n_groups + g, d, mask=g < n_groups)
    runs = g[:, None] * 2 + tl.arange(0, 2)[None, :]
    tl.store(xs_ptr + b * n_groups * 2 + runs, isum, mask=runs < n_groups * 2)


@dataclass(frozen=True)
class QuantizedActivation:
    """x [B, K] in 8 bits, as the integer GEMV reads it: words [B, K/4] int32 (4 int8 q each),
    scales [B, K/32] float32 (d per 32 values), sums [B, K/16] int32 (sum of q per 16)."""

    words: torch.Tensor
    scales: torch.Tensor
    sums: torch.Tensor

    @property
    def shape(self) -> tuple[int, int]:
        return self.words.shape[0], self.words.shape[1] * 4


def quantize_activation(x: torch.Tensor, *, let_next_start: bool = False,
                        after_prior: bool = False) -> QuantizedActivation:  # fmt: skip
    """x [..., K] (K a multiple of 32, f16/bf16/f32) in 8 bits, one small launch. Quantize once
    and pass the result to every quant_matmul that reads the same x (`quantized=`): the q, k
    and v projections, or gate and up, then pay one launch instead of three or two.
    let_next_start: the next kernel, if a chained launch, may start before this one ends (the
    integer GEMV's; only on sm_90+, ignored elsewhere). after_prior: launched as the kernel
    before's dependent (sm_90+), which lets it start when that kernel lets its dependents in.
    """
    x = x.reshape(-1, x.shape[-1])
    if x.stride(-1) != 1:
        x = x.contiguous()
    n_rows, k = x.shape
    if k % 32:
        raise UnsupportedTensor(f"8-bit activations need rows of whole 32s, not {k}")
    n_groups = k // 32
    out = empty_quantized(n_rows, k, x.device)
    groups = 16
    chained = has_dependent_launch(x.device)
    wait = after_prior and chained
    quantize_kernel[(triton.cdiv(n_groups, groups), n_rows)](
        x, out.words, out.scales, out.sums, n_groups, x.stride(0), GROUPS=groups,
        LET_NEXT_START=let_next_start and chained, WAIT_PRIOR=wait, num_warps=2,
        **({"launch_pdl": True} if wait else {}),
    )  # fmt: skip
    return out


def empty_quantized(n_rows: int, k: int, device: torch.device) -> QuantizedActivation:
    """Buffers for n_rows rows of k values in 8 bits (k a multiple of 32), for a kernel that
    writes them (`store_quantized`)."""
    if k % 32:
        raise UnsupportedTensor(f"8-bit activations need rows of whole 32s, not {k}")
    return QuantizedActivation(
        torch.empty(n_rows, k // 4, dtype=torch.int32, device=device),
        torch.empty(n_rows, k // 32, dtype=torch.float32, device=device),
        torch.empty(n_rows, k // 16, dtype=torch.int32, device=device),
    )
