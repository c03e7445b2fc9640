"""Mixture-of-experts prefill: a grouped GEMM over a chunk's (token, slot) pairs sorted by expert,
the experts' quantized blocks dequantized in registers into f16 tiles that meet the activations
in `tl.dot` (tensor cores), float32 accumulation; every format the expert GEMV reads
(moe_blocks.FORMAT_CODES: Q4_K, Q5_K, Q6_K, Q8_0, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1).

    grouped_gate_up:  h[p]    = act(Wg[e] x[t] + bg[e], Wu[e] x[t] + bu[e])   p = t k + s
    grouped_down:     out[t]  = sum_s weights[t, s] (Wd[e] h[t k + s] + bd[e])  e = ids[t, s]

Routing (`align_pairs`, two launches, nothing read back to the host). The P = T k pairs are
counted per expert in chunks of CHUNK pairs, at most MAX_CHUNKS chunks (one program a chunk:
its histogram), then placed (one program a chunk: each reads every chunk's histogram) into
`sorted_pairs`, where expert e's pairs take blocks of BLOCK_M slots, its last block padded:
expert e's pairs start at slot BLOCK_M (block_end[e] - cdiv(count[e], BLOCK_M)), in pair
order. A launch's grid is sized for the most blocks any routing can need,
cdiv(P + min(E, P) (BLOCK_M - 1), BLOCK_M) (as vLLM's moe_align_block_size sizes it), so no
count is read back; a program finds its block's expert as the number of experts whose blocks
end at or before its block, and one past the last block returns at once. Padding slots are
never written: a program masks its rows past its expert's count.

GEMM (one launch a projection). A program takes one block of BLOCK_M pairs of one expert and a
tile of BLOCK_N weight rows, the weight rows as the MMA's M side and the pairs as its N side
(acc [BLOCK_N, BLOCK_M]: Hopper's wgmma takes M in 64s a warpgroup and N from 8 up, and an
expert gets ~32-64 pairs of a 512-token chunk), and walks K in steps of NG groups of 32
weights: moe_blocks.load_pairs reads the step's code words and run scales (the expert GEMV's
block decoding), `_weight_tile` turns them into f16 weights s u - c (a byte permute puts each
code under the f16 exponent of 1024, an exact f16x2 subtraction and one f16x2 FMA with the
run's scale and offset: no int-to-float conversions), and each run's 16 columns of x are
gathered to match as the MMA's shared-memory operand: a run's weights in the order
_weight_tile makes (_mma_order), the runs of a step in load_pairs' order, not the row's (the
sum over K does not care). Two dots a step, K = 16 NG each (a group's low and high runs).
Gate and up are read by the same program (their own formats), and the bias and the
activation applied before h is stored in f16. The down projection's program applies the bias
and the pair's routing weight and stores the pair's row in float32; the k rows of a token are
then summed in slot order in torch (a fixed order: the same bits on every run, as the expert
GEMV gives; atomics across the programs of different experts would not).

Activations. x in f16 (f16 or f32 inputs are cast per tile; bf16 too, whose range f16 does not
always hold). The error against float64 is that of f16 weights and activations (about 1e-3 of
a dot product; the run scales and offsets rounded to f16 too), not the GEMV's 8-bit
activations.

Compiled for sm_90 (Triton 3.6; `python -m benchmarks.kernels.moe_grouped_sass`), no format
spills at default_config's shapes; the loop takes 9.8 instructions a weight a thread for Q4_K
gate+up (8.4 at K steps of 4 groups) and 11.9 for Q6_K down at blocks of 64 pairs; a kernel
with the pairs as the MMA's M side took 26.8 and 18.1, with an int-to-float conversion (a
quarter-rate instruction) a weight among them, and lost on an H200 at every size measured
(docs/decisions/0021-moe-prefill-by-dequantized-bmm.md). Whether ptxas keeps the wgmmas
pipelined (its C7515 note otherwise) varies by format and shape: the sweep in
benchmarks/kernels/moe_prefill.py measures the shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import interpret_mode, require
from kernels.errors import UnsupportedTensor
from kernels.moe_blocks import FORMAT_CODES, glu, load_pairs, plane_args
from kernels.moe_gemv import SILU, _check

CHUNK = 64  # pairs a routing program counts and places (more for long chunks: MAX_CHUNKS)
MAX_CHUNKS = 64  # the placing program reads every chunk's histogram: [MAX_CHUNKS, E_PAD]
_SILU, _OAI = 0, 1  # the kernel's ACT, as moe_blocks.glu reads it


@dataclass(frozen=True)
class GroupedConfig:
    block_m: int = 64  # pairs a program (one expert's): the MMA's N side
    block_n: int = 128  # weight rows a program: the MMA's M side, two warpgroups of 64
    # groups of 32 weights a K step: two dots of K = 16 NG (a group's low and high runs)
    ng: int = 2
    num_warps: int = 8
    num_stages: int = 3


def default_config(n_pairs: int, n_expert: int) -> GroupedConfig:
    """BLOCK_M: the power of two (16 to 128) at or above 1.5 times the pairs an expert gets on
    average, so that most experts fill one block: the weights' decoding (CUDA cores) is paid
    once a block, the padding only in tensor-core products. Qwen3-30B-A3B, 512 tokens top-8 of
    128 (32 an expert): 64; gpt-oss-20b, 512 tokens top-4 of 32 (64): 128; 64 tokens of
    Qwen3 (4): 16."""
    per_expert = n_pairs / max(1, n_expert)
    return block_config(min(128, max(16, triton.next_power_of_2(math.ceil(1.5 * per_expert)))))


def block_config(block_m: int) -> GroupedConfig:
    """default_config's launch shape for blocks of block_m pairs: 128 weight rows, 8 warps; K
    steps of 4 groups up to 64 pairs, of 2 at 128 (the two float32 accumulators take 128 of
    the 234-252 registers a thread there). Compiled for sm_90 by Triton 3.6, those are the
    steps at which ptxas keeps the wgmmas pipelined in Qwen3-30B-A3B's Q4_K gate+up and Q6_K
    down at 64 pairs and in gpt-oss-20b's MXFP4 gate+up at 128 (not its down at either)."""
    return GroupedConfig(block_m=block_m, ng=4 if block_m <= 64 else 2)


@dataclass(frozen=True)
class AlignedPairs:
    """A chunk's pairs in expert-sorted blocks (module docstring). ids, weights: the caller's
    [T, k]; sorted_pairs [max_blocks BLOCK_M], block_end [n_expert], count [n_expert]: int32."""

    ids: torch.Tensor
    weights: torch.Tensor | None
    n_expert: int
    block_m: int
    sorted_pairs: torch.Tensor
    block_end: torch.Tensor
    count: torch.Tensor

    @property
    def n_pairs(self) -> int:
        return self.ids.numel()

    @property
    def max_blocks(self) -> int:
        return max_blocks(self.n_pairs, self.n_expert, self.block_m)


def max_blocks(n_pairs: int, n_expert: int, block_m: int) -> int:
    """The most blocks of block_m any routing of n_pairs over n_expert experts fills."""
    return triton.cdiv(n_pairs + min(n_expert, n_pairs) * (block_m - 1), block_m)


@triton.jit
def _count_kernel(ids_ptr, hist_ptr, P, n_expert, E_PAD: tl.constexpr, CH: tl.constexpr):
    """hist[chunk, e]: pairs of this chunk that picked expert e (bin n_expert: the padding)."""
    c = tl.program_id(0)
    i = c * CH + tl.arange(0, CH)
    ids = tl.load(ids_ptr + i, mask=i < P, other=0).to(tl.int32)
    hist = tl.histogram(tl.where(i < P, ids, n_expert), E_PAD)
    tl.store(hist_ptr + c * E_PAD + tl.arange(0, E_PAD), hist)


@triton.jit
def _place_kernel(ids_ptr, hist_ptr, sorted_ptr, block_end_ptr, count_ptr, P, n_expert,
                  n_chunks, BLOCK_M: tl.constexpr, E_PAD: tl.constexpr, C_PAD: tl.constexpr,
                  CH: tl.constexpr):  # fmt: skip
    """Each pair of this chunk to its slot: its expert's first slot, plus the expert's pairs in
    earlier chunks, plus those before it in this chunk. Program 0 also stores block_end and
    count."""
    c = tl.program_id(0)
    e = tl.arange(0, E_PAD)
    chunks = tl.arange(0, C_PAD)[:, None]
    hist = tl.load(hist_ptr + chunks * E_PAD + e[None, :], mask=chunks < n_chunks, other=0)
    total = tl.sum(hist, axis=0) * (e < n_expert)  # [E_PAD], the padding bin dropped
    before = tl.sum(tl.where(chunks < c, hist, 0), axis=0)
    blocks = (total + BLOCK_M - 1) // BLOCK_M
    ends = tl.cumsum(blocks, 0)
    base = (ends - blocks) * BLOCK_M + before  # [E_PAD]
    i = c * CH + tl.arange(0, CH)
    valid = i < P
    ids = tl.load(ids_ptr + i, mask=valid, other=0).to(tl.int32)
    mine = ((ids[:, None] == e[None, :]) & valid[:, None]).to(tl.int32)  # [CH, E_PAD]
    rank = tl.cumsum(mine, 0) - mine  # pairs of the same expert before, in this chunk
    slot = tl.sum(mine * (base[None, :] + rank), axis=1)
    tl.store(sorted_ptr + slot, i, mask=valid)
    if c == 0:
        tl.store(block_end_ptr + e, ends, mask=e < n_expert)
        tl.store(count_ptr + e, total, mask=e < n_expert)


def align_pairs(ids: torch.Tensor, weights: torch.Tensor | None, n_expert: int,
                block_m: int) -> AlignedPairs:  # fmt: skip
    """ids [T, k] (integers in 0..n_expert-1, not checked on the device), the routing weights
    [T, k] (for grouped_down) -> AlignedPairs for blocks of block_m pairs (module docstring)."""
    require()
    if ids.dim() != 2 or min(ids.shape) < 1 or ids.dtype.is_floating_point:
        raise UnsupportedTensor(
            f"expert ids {ids.dtype} of shape {tuple(ids.shape)}: pass integers [tokens, top_k]"
        )
    if weights is not None and weights.shape != ids.shape:
        raise UnsupportedTensor(
            f"routing weights {tuple(weights.shape)} for ids {tuple(ids.shape)}"
        )
    ids = ids.contiguous()
    n_pairs = ids.numel()
    device = ids.device
    chunk = max(CHUNK, triton.next_power_of_2(triton.cdiv(n_pairs, MAX_CHUNKS)))
    n_chunks = triton.cdiv(n_pairs, chunk)
    e_pad = max(16, triton.next_power_of_2(n_expert + 1))
    slots = max_blocks(n_pairs, n_expert, block_m) * block_m
    buffers = torch.empty(n_chunks * e_pad + slots + 2 * n_expert, dtype=torch.int32, device=device)
    hist, sorted_pairs, block_end, count = torch.split(
        buffers, [n_chunks * e_pad, slots, n_expert, n_expert]
    )
    _count_kernel[(n_chunks,)](ids, hist, n_pairs, n_expert, E_PAD=e_pad, CH=chunk, num_warps=4)
    _place_kernel[(n_chunks,)](
        ids, hist, sorted_pairs, block_end, count, n_pairs, n_expert, n_chunks, BLOCK_M=block_m,
        E_PAD=e_pad, C_PAD=max(2, triton.next_power_of_2(n_chunks)), CH=chunk, num_warps=8,
    )  # fmt: skip
    return AlignedPairs(
        ids, None if weights is None else weights.contiguous(), n_expert, block_m, sorted_pairs,
        block_end, count,
    )  # fmt: skip


# f16 with bits 0x64XX is 1024 + XX exactly: a code byte becomes an f16 by a byte permute and
# one exact f16 subtraction, never the int-to-float unit (kernels/nibbles.py's trick), then one
# f16x2 FMA applies the scale and offset, two weights at a time. Elementwise over two weights
# (pack=2), each given as a word whose byte 0 is its code ($1, $2) and its run's scale ($3,
# $4) and negated offset ($5, $6) as an f16 in both halves of a word, so that the result is
# right whichever two weights Triton's layout puts in one call: prmt 0x0400 takes byte 0 of
# each word to bytes 0 and 2, lop3 0xEA ((a & b) | c) sets the exponent bytes 1 and 3, and
# prmt 0x7610 takes the first scale's low half and the second's high half.
_CODE_PAIR_F16_ASM = tl.constexpr("""
{
.reg .b32 t, s, c, magic;
mov.b32 magic, 0x64006400;
prmt.b32 t, $1, $2, 0x0400;
lop3.b32 t, t, 0x00FF00FF, 0x64006400, 0xEA;
sub.f16x2 t, t, magic;
prmt.b32 s, $3, $4, 0x7610;
prmt.b32 c, $5, $6, 0x7610;
fma.rn.f16x2 $0, t, s, c;
}
""")


@triton.jit
def _f16_pair(v):
    """float32 v -> its f16 in both halves of an int32 word (an f16x2 operand)."""
    bits = v.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return bits | (bits << 16)


@triton.jit
def _byte_pair_f16(u, b: tl.constexpr, s, c, ASM: tl.constexpr):
    """Bytes b and b + 1 of code words u [BN, NG, 4] -> their weights s u - c as f16
    [BN, NG, 4, 2] (s, c [BN, NG] float32, rounded to f16, the FMA rounded once)."""
    pair = tl.join(u >> (8 * b), u >> (8 * b + 8))  # each code in byte 0 of its word
    if ASM:
        shape: tl.constexpr = pair.shape
        s2 = tl.broadcast_to(_f16_pair(s)[:, :, None, None], shape)
        c2 = tl.broadcast_to(_f16_pair(-c)[:, :, None, None], shape)
        return tl.inline_asm_elementwise(
            _CODE_PAIR_F16_ASM, "=r,r,r,r,r,r,r", [pair, s2, c2], dtype=tl.float16,
            is_pure=True, pack=2,
        )  # fmt: skip
    else:
        s16 = s.to(tl.float16).to(tl.float32)[:, :, None, None]
        c16 = (-c).to(tl.float16).to(tl.float32)[:, :, None, None]
        return ((pair & 0xFF).to(tl.float32) * s16 + c16).to(tl.float16)


@triton.jit
def _weight_tile(u, s, c, ASM: tl.constexpr):
    """Code words u [BN, NG, 4] (byte j of word w: code 4 w + j of the run) with run scale s
    and offset c [BN, NG] float32 -> the runs' weights s u - c in f16 [BN, NG 16], each run's
    16 in MMA order: place p = b0 + 2 w + 8 b1 holds code 4 w + 2 b1 + b0 (_mma_order). In the
    wgmma register operand's layout a thread holds places p, p + 1 and p + 8, p + 9 for one
    p of 0, 2, 4, 6 by lane, so the bytes b0 and b1 of a word it expands are its own (the
    joins below stay in its registers) and the lanes split the words."""
    bn: tl.constexpr = u.shape[0]
    ng: tl.constexpr = u.shape[1]
    w = tl.join(_byte_pair_f16(u, 0, s, c, ASM), _byte_pair_f16(u, 2, s, c, ASM))
    w = tl.permute(w, (0, 1, 4, 2, 3))  # [BN, NG, b1, word, b0]
    return tl.reshape(w, [bn, ng * 16])


@triton.jit
def _mma_order():
    """[16]: the code in its run (4 w + 2 b1 + b0) that _weight_tile puts at each place."""
    p = tl.arange(0, 16)
    return 4 * ((p >> 1) & 3) + 2 * (p >> 3) + (p & 1)


@triton.jit
def _x_in_mma_order(x_ptr, x_row, row_mask, r, K, NG: tl.constexpr):
    """x's columns of runs r [NG] (16 each) for rows x_row [BM], in _weight_tile's order ->
    f16 [BM, NG 16]. Places 2i, 2i + 1 are consecutive columns (the hints let the compiler
    load them as pairs)."""
    cols = tl.reshape(r[:, None] * 16 + _mma_order()[None, :], [NG * 16])
    cols = tl.max_contiguous(tl.multiple_of(cols, 2), 2)
    mask = row_mask[:, None] & (cols < K)[None, :]
    return tl.load(x_ptr + x_row[:, None] * K + cols[None, :], mask=mask, other=0.0).to(tl.float16)


@triton.jit
def _grouped_kernel(
    x_ptr, out_ptr, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, bias_a_ptr, bias_b_ptr,
    sorted_ptr, block_end_ptr, count_ptr, weights_ptr,
    N, K, NB_A, NB_B, TOP_K, n_expert, alpha, limit,
    FMT_A: tl.constexpr, FMT_B: tl.constexpr, GATE_UP: tl.constexpr, ACT: tl.constexpr,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NG: tl.constexpr,
    E_PAD: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """See the module docstring. out: h [P, N] (GATE_UP) or the weighted rows [P, N] float32.
    The weight rows are the MMA's M side (acc [BLOCK_N, BLOCK_M]: Hopper's wgmma takes M in
    64s a warpgroup, and an expert's block of pairs is often fewer), the pairs its N side."""
    tile = tl.program_id(0)
    block = tl.program_id(1)
    e = tl.arange(0, E_PAD)
    ends = tl.load(block_end_ptr + e, mask=e < n_expert, other=2147483647)
    expert = tl.sum((ends <= block).to(tl.int32), axis=0)
    if expert < n_expert:
        count = tl.load(count_ptr + expert)
        first = tl.load(block_end_ptr + expert) - (count + BLOCK_M - 1) // BLOCK_M
        m = (block - first) * BLOCK_M + tl.arange(0, BLOCK_M)
        m_mask = m < count
        pair = tl.load(sorted_ptr + block * BLOCK_M + tl.arange(0, BLOCK_M), mask=m_mask, other=0)
        if GATE_UP:  # noqa: SIM108 (a static if)
            x_row = (pair // TOP_K).to(tl.int64)
        else:
            x_row = pair.to(tl.int64)
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        row_mask = rows < N
        wrow = expert.to(tl.int64) * N + rows
        acc_a = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
        acc_b = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
        for k0 in range(0, K // 32, NG):
            ge = k0 + tl.arange(0, NG)
            group_mask = ge < K // 32
            u_lo, u_hi, s_lo, c_lo, s_hi, c_hi, r_lo, r_hi = load_pairs(
                a0, a1, a2, a3, a4, wrow, row_mask, ge, group_mask, NB_A, FMT_A, ASM
            )
            x_lo = tl.trans(_x_in_mma_order(x_ptr, x_row, m_mask, r_lo, K, NG))  # [NG 16, BM]
            x_hi = tl.trans(_x_in_mma_order(x_ptr, x_row, m_mask, r_hi, K, NG))
            acc_a = tl.dot(_weight_tile(u_lo, s_lo, c_lo, ASM), x_lo, acc_a)
            acc_a = tl.dot(_weight_tile(u_hi, s_hi, c_hi, ASM), x_hi, acc_a)
            if GATE_UP:
                u_lo, u_hi, s_lo, c_lo, s_hi, c_hi, rb_lo, rb_hi = load_pairs(
                    b0, b1, b2, b3, b4, wrow, row_mask, ge, group_mask, NB_B, FMT_B, ASM
                )
                if FMT_B != FMT_A:  # the runs come in another order: x gathered again
                    x_lo = tl.trans(_x_in_mma_order(x_ptr, x_row, m_mask, rb_lo, K, NG))
                    x_hi = tl.trans(_x_in_mma_order(x_ptr, x_row, m_mask, rb_hi, K, NG))
                acc_b = tl.dot(_weight_tile(u_lo, s_lo, c_lo, ASM), x_lo, acc_b)
                acc_b = tl.dot(_weight_tile(u_hi, s_hi, c_hi, ASM), x_hi, acc_b)
        if HAS_BIAS:
            acc_a += tl.load(bias_a_ptr + expert * N + rows, mask=row_mask, other=0.0)[:, None]
            if GATE_UP:
                acc_b += tl.load(bias_b_ptr + expert * N + rows, mask=row_mask, other=0.0)[:, None]
        if GATE_UP:
            y = glu(acc_a, acc_b, alpha, limit, ACT)
        else:
            y = acc_a * tl.load(weights_ptr + pair, mask=m_mask, other=0.0).to(tl.float32)[None, :]
        at = out_ptr + pair.to(tl.int64)[None, :] * N + rows[:, None]
        tl.store(at, y.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & m_mask[None, :])


def _launch(x, out, a, b, aligned: AlignedPairs, act, config: GroupedConfig | None) -> None:
    cfg = config or block_config(aligned.block_m)
    if cfg.block_m != aligned.block_m:
        raise UnsupportedTensor(
            f"pairs aligned to blocks of {aligned.block_m} for a launch of {cfg.block_m}"
        )
    n_out = a.n_out
    pa = plane_args(a.packed)
    pb = plane_args(b.packed) if b is not None else pa
    has_bias = a.bias is not None or (b is not None and b.bias is not None)
    bias_a = bias_b = out
    if has_bias:
        bias_a = a.bias if a.bias is not None else torch.zeros(a.n_expert, n_out, device=x.device)
        bias_b = bias_a
        if b is not None:
            bias_b = b.bias if b.bias is not None else torch.zeros_like(bias_a)
    weights = aligned.weights if aligned.weights is not None else out
    fb = b.packed.fmt if b is not None else a.packed.fmt
    grid = (triton.cdiv(n_out, cfg.block_n), aligned.max_blocks)
    _grouped_kernel[grid](
        x, out, *pa, *pb, bias_a, bias_b, aligned.sorted_pairs, aligned.block_end, aligned.count,
        weights, n_out, a.n_in, a.n_in // a.packed.fmt.block_size, a.n_in // fb.block_size,
        aligned.ids.shape[1], aligned.n_expert, float(act.alpha), float(act.limit),
        FMT_A=FORMAT_CODES[a.fmt], FMT_B=FORMAT_CODES[fb.name], GATE_UP=b is not None,
        ACT=_OAI if act.kind == "swiglu_oai" else _SILU, HAS_BIAS=has_bias,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, NG=cfg.ng,
        E_PAD=max(16, triton.next_power_of_2(aligned.n_expert)), num_warps=cfg.num_warps,
        num_stages=cfg.num_stages, ASM=not interpret_mode(),
    )  # fmt: skip


def grouped_gate_up(x: torch.Tensor, gate, up, aligned: AlignedPairs, activation, *,
                    config: GroupedConfig | None = None) -> torch.Tensor:  # fmt: skip
    """x [T, n_in] -> h [T k, n_ff] f16: act(gate, up) of each pair (row p = t k + s), in one
    launch; gate and up: kernels.moe_gemv.ExpertWeight of the same shape (each its own
    format), activation: kernels.moe_gemv.GluActivation."""
    require()
    _check(x, gate, aligned, aligned.ids.shape[0])
    if (up.n_expert, up.n_out, up.n_in) != (gate.n_expert, gate.n_out, gate.n_in):
        raise UnsupportedTensor(
            f"gate experts {(gate.n_expert, gate.n_out, gate.n_in)} and up experts "
            f"{(up.n_expert, up.n_out, up.n_in)} differ in shape"
        )
    h = torch.empty(aligned.n_pairs, gate.n_out, dtype=torch.float16, device=x.device)
    _launch(x.contiguous(), h, gate, up, aligned, activation, config)
    return h


def grouped_down(h: torch.Tensor, w, aligned: AlignedPairs, *, out_dtype=None,
                 config: GroupedConfig | None = None) -> torch.Tensor:  # fmt: skip
    """h [T k, n_in] (grouped_gate_up's output) -> [T, n_out] in out_dtype (default h's): each
    pair's down projection (plus bias) times its routing weight, summed over the k slots in
    slot order."""
    require()
    if aligned.weights is None:
        raise UnsupportedTensor("grouped_down needs the routing weights: pass them to align_pairs")
    _check(h, w, aligned, aligned.n_pairs)
    rows = torch.empty(aligned.n_pairs, w.n_out, dtype=torch.float32, device=h.device)
    _launch(h.contiguous(), rows, w, None, aligned, SILU, config)
    out = rows.view(*aligned.ids.shape, w.n_out).sum(dim=1)
    return out.to(out_dtype or h.dtype)


def grouped_moe(x: torch.Tensor, gate, up, down, activation, ids: torch.Tensor,
                weights: torch.Tensor, *,
                config: GroupedConfig | None = None) -> torch.Tensor:  # fmt: skip
    """The experts' feed-forward of a chunk, x [T, n_embd] -> [T, n_embd] in x's dtype: pairs
    aligned once (shared by both projections), then grouped_gate_up and grouped_down."""
    cfg = config or default_config(ids.numel(), gate.n_expert)
    aligned = align_pairs(ids, weights, gate.n_expert, cfg.block_m)
    h = grouped_gate_up(x, gate, up, aligned, activation, config=cfg)
    return grouped_down(h, down, aligned, out_dtype=x.dtype, config=cfg)
