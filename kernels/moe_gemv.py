"""Mixture-of-experts GEMV: the selected experts only, grouped by expert, in one launch a
projection; Q4_K, Q5_K, Q6_K, Q8_0, MXFP4, and Q4_0, Q4_1, Q5_0, Q5_1 (the small-block types
llama.cpp puts where a row is not whole K-quant super-blocks).

    expert_rows:     y[t, s]  = W[e] x[t] (+ b[e])                          e = ids[t, s]
    expert_gate_up:  h[t, s]  = act(Wg[e] x[t] + bg[e], Wu[e] x[t] + bu[e])  (silu or swiglu_oai)
    expert_down:     out[t]   = sum_s weights[t, s] (Wd[e] h[t, s] + bd[e])

Work. The routing is grouped by expert first (kernels/moe_routing.py, one small launch shared
by a layer's projections). The grid is (tile of BLOCK_N weight rows, split of K, group): the
program of group g reads expert group_expert[g]'s tile once, holds it in registers, and applies
it to each pair that picked that expert (at most T), so tokens that picked the same expert
share every weight read; groups past the step's count (the grid is sized for the most that
can be picked, min(n_expert, T k), so that it never depends on the routing) return at once.
Each program reads one split of K: a row of up to `max_runs` runs of 16 weights (2048 weights
by default: a Qwen3-30B-A3B expert's whole row), longer rows in several splits.

Activations. As the dense decode GEMV (kernels/gemv.py's integer path): x in 8 bits per 32
values, and every format's codes meet it in dp4a (moe_blocks.py). expert_rows and
expert_gate_up read x's 8-bit form (act_quant.quantize_activation, or the caller's
QuantizedActivation: the RMSNorm before them writes it). expert_down reads h in float and each
program rounds the runs it reads to 8 bits in registers (the bits quantize_activation would
store: act_quant's inverse_scale and rounded_words; a K-quant run's group of 32 is not in the
program's own pair of runs, so it reads the group's other half too, from L1). Every program
of a group repeats that for its pairs, at most n_ff values a pair: the launch of its own that
it replaces cost more. The error this adds is the dense path's (0.3-0.9% of a dot product
against float x); against x rounded the same way the kernel is exact up to float32 sums. The
down gives the same bits whichever way it reads h (rounded here, or by quantize_activation):
its float steps are explicit fmas (moe_blocks.run_sums, group_terms) and its sum over the
groups a tree the source fixes (tree_sums.tree_sum), so that neither the compiler's contractions nor
the tile's layout, which differ between the two compiled kernels, change the bits.

One token. A decode step of one sequence picks k distinct experts, one pair each: group g is
then slot g, and the kernel (ONE_TOKEN) reads its expert from the routing's ids, its pair
being g, where a step of several tokens reads the grouping (the group's expert, first pair
and count, then each pair before its x): the same bits, two dependent loads fewer before x,
and 70-72 registers where those reads took 95-122 (more programs an SM). Its down, where the
experts are in device memory, goes through moe_down_dp4a.py (one integer GEMV over the k
experts' rows side by side, h rounded by a launch of its own) for Q4_K and Q6_K experts of
whole super-blocks without biases, and that gate/up lets it in as each program starts
(`then`); else through moe_one_token.py (every slot's expert in one program, summed there,
the same bits) where the row fits one split.

Results. A program's partial for pair p (one split) goes straight to the output when nothing
remains to add: one split, and per-pair rows (expert_rows, expert_gate_up: the bias and the
activation are applied in registers, gate and up being read by the same program). Otherwise
(several splits, or the down projection, whose output row of token t sums the k pairs of t,
each computed by another group's program) every program stores its float32 partials, takes a
ticket from its row tile's counter (kernels/tickets.py), and the program that takes the last
one (the tile's n_splits x n_groups-th) adds them up in a fixed order: splits, then for the
down projection bias and routing weight per slot, slot by slot. The result is the same bits
whatever order the programs ran in, and the engine launches no combine of its own.

Dependent launch (sm_90+, MoeGemvConfig.pdl, the default). The kernel is launched with
launch_pdl, so that it may start while the kernel before it still runs (the one that wrote x:
the quantization of x before gate/up, and gate/up before down, which lets the next kernel in
once its dot products are done): a program reads its routing entries and its weight tile,
then waits (griddepcontrol.wait) for the kernel before to finish before it reads x (or h) or
writes anything, and lets the next kernel in once its dot products are done. Reading the
routing before the wait is safe because the routing's launch lets nothing in early: whatever
runs after it starts after it has finished, and the weights are not written by any kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels import moe_down_dp4a, moe_one_token
from kernels.act_quant import QuantizedActivation, quantize_activation
from kernels.availability import interpret_mode, require
from kernels.errors import UnsupportedTensor
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch
from kernels.moe_blocks import (
    FORMAT_CODES,
    Q8_0,
    glu,
    group_terms,
    load_pairs,
    plane_args,
    run_sums,
    runs_in_8_bits,
)
from kernels.moe_one_token_rule import ONE_SPLIT_RUNS, ONE_TOKEN_MAX_SLOTS
from kernels.moe_routing import ExpertRouting
from kernels.packed_weight import PackedWeight
from kernels.tickets import TicketCounters
from kernels.tree_sums import tree_sum

EXPERT_FORMATS = tuple(FORMAT_CODES)
ROWS, GATE_UP, DOWN = 0, 1, 2  # the kernel's MODE
_SILU, _OAI = 0, 1  # its ACT


@dataclass(frozen=True)
class GluActivation:
    """The gated activation of expert_gate_up: "silu" (silu(g) u: qwen3moe, qwen2moe, Mixtral)
    or "swiglu_oai" (gpt-oss: min(g, limit) sigmoid(alpha min(g, limit)) (clamp(u) + 1))."""

    kind: str = "silu"
    alpha: float = 1.702
    limit: float = 7.0

    def apply(self, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The activation in torch (where gate and up come from two launches)."""
        if self.kind == "silu":
            return torch.nn.functional.silu(g) * u
        g = g.clamp(max=self.limit)
        return g * torch.sigmoid(self.alpha * g) * (u.clamp(-self.limit, self.limit) + 1.0)


SILU = GluActivation("silu")
SWIGLU_OAI = GluActivation("swiglu_oai")


@dataclass(frozen=True)
class MoeGemvConfig:
    block_n: int = 4  # weight rows a program
    max_runs: int = ONE_SPLIT_RUNS  # runs of 16 weights a program reads of a row (one split)
    num_warps: int = 2
    pdl: bool = True  # a dependent launch where the GPU has one (sm_90+; module docstring)
    # the next launch let in as each program starts, not once its dot products are done
    early_next: bool = False


def one_token_config() -> MoeGemvConfig:
    """The launch shape of a one-token step's down (moe_one_token.py): 16 rows of each slot's
    expert a program and 8 warps (Qwen3-30B-A3B: 128 programs, one an SM; measured best of
    the shapes in docs/decisions/2026-11-29-one-token-expert-gemv.md)."""
    return MoeGemvConfig(block_n=16, num_warps=8)


def dense_down_config() -> MoeGemvConfig:
    """The launch shape of a one-token step's down through moe_down_dp4a.py: 4 output rows
    (each over the k experts' rows) and 4 warps a program (Qwen3-30B-A3B: 512 programs)."""
    return MoeGemvConfig(block_n=4, num_warps=4)


def takes_dense_down(w: ExpertWeight, routing: ExpertRouting) -> bool:
    """Whether expert_down takes moe_down_dp4a.py's down for this step by default: one token,
    experts in device memory without biases, the integer GEMV's formats and whole
    super-blocks."""
    return (
        routing.n_tokens == 1
        and not w.in_host_memory
        and w.bias is None
        and moe_down_dp4a.takes(w.fmt, w.n_in)
    )


def takes_one_token(n_tokens: int, top_k: int, n_in: int,
                    config: MoeGemvConfig | None = None) -> bool:  # fmt: skip
    """Whether a down of this step can take moe_one_token.py's kernel: one token, at most
    ONE_TOKEN_MAX_SLOTS picks, the whole row (n_in) in one split."""
    fits = n_in // 16 <= (config or MoeGemvConfig()).max_runs
    return n_tokens == 1 and top_k <= ONE_TOKEN_MAX_SLOTS and fits


def default_config(fmt: str, mode: int, one_token: bool = False) -> MoeGemvConfig:
    """The launch shape of each mode (docs/kernels-moe.md): whole rows up to 2048 wide, a
    dependent launch. gate/up and rows: 4 rows a program (measured best on an H200); 4 warps
    for Q4_K gate+up (Qwen3-30B-A3B's shape, 1 token: 9.7 us against 10.7 with 2), else 2.
    The down: 16 rows and 4 warps, because each of its programs rounds its pairs' h to 8 bits
    itself, and 16 rows share one rounding where 4 rows paid it four times over: sm_90 SASS
    at 1 token, Qwen3-30B-A3B's down 1,024 programs of 4 warps x 920 instructions against
    4,096 of 2 x 760 (40% fewer issued), gpt-oss-20b's 2,160 of 4 x 1,088 against 8,640 of
    2 x 848 (35% fewer). A one-token step's down reading its experts from the ids (one_token;
    its registers 72 where the grouping's reads took 114-122): MXFP4 at 8 rows and 2 warps,
    gpt-oss's 13.8 us against 15.3 at 16 x 4 (H200, docs/kernels-moe.md); others at 4 x 2,
    Qwen3-30B-A3B's 9.4-9.7 us against 9.8-9.9 at 8 x 2, where its Q6_K spills 8 bytes."""
    if mode == DOWN:
        if one_token:
            return MoeGemvConfig(8 if fmt == "MXFP4" else 4, num_warps=2)
        return MoeGemvConfig(16, num_warps=4)
    return MoeGemvConfig(num_warps=4 if (mode == GATE_UP and fmt == "Q4_K") else 2)


@dataclass(frozen=True)
class ExpertWeight:
    """A GGUF expert tensor [n_expert, n_out, n_in] on the GPU: its bytes as a PackedWeight of
    n_expert n_out rows (the same bytes; expert e is rows e n_out ..), and its bias [n_expert,
    n_out] float32 where the model has one (gpt-oss)."""

    packed: PackedWeight
    n_expert: int
    bias: torch.Tensor | None = None
    # its planes are device views of pinned host memory (the engine's experts read in place,
    # over the bus): a one-token step's down then keeps this module's kernel, which was faster
    # there than moe_one_token.py's (docs/decisions/2026-11-29-one-token-expert-gemv.md)
    in_host_memory: bool = False

    @classmethod
    def from_gguf(cls, raw: object, ggml_type: object, shape: tuple[int, int, int],
                  device: object = "cuda", bias: object = None) -> ExpertWeight:  # fmt: skip
        """raw: the tensor's bytes as stored; shape (n_expert, n_out, n_in): GGUF's ne
        reversed; bias: [n_expert, n_out] (any float array or tensor) or None."""
        n_expert, n_out, n_in = (int(s) for s in shape)
        packed = PackedWeight.from_gguf(raw, ggml_type, (n_expert * n_out, n_in), device)
        if packed.fmt.name not in EXPERT_FORMATS:
            raise UnsupportedTensor(
                f"{packed.fmt.name} experts have no expert GEMV; supported: "
                f"{', '.join(EXPERT_FORMATS)}"
            )
        if bias is not None:
            bias = torch.as_tensor(bias).to(device=packed.device, dtype=torch.float32)
            if tuple(bias.shape) != (n_expert, n_out):
                raise UnsupportedTensor(
                    f"expert bias of shape {tuple(bias.shape)}: expected {(n_expert, n_out)}"
                )
            bias = bias.contiguous()
        return cls(packed, n_expert, bias)

    @property
    def n_out(self) -> int:
        return self.packed.n_out // self.n_expert

    @property
    def n_in(self) -> int:
        return self.packed.n_in

    @property
    def fmt(self) -> str:
        return self.packed.fmt.name

    @property
    def expert_nbytes(self) -> int:
        """Bytes of one expert's matrix (what a step reads per expert it picks)."""
        return self.packed.nbytes // self.n_expert


@triton.jit
def _expert_kernel(
    x_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr,
    a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, bias_a_ptr, bias_b_ptr,
    order_ptr, group_expert_ptr, group_start_ptr, group_count_ptr, n_groups_ptr, ids_ptr,
    weights_ptr,
    N, K, NB, TOP_K, n_pairs, n_tokens, alpha, limit,
    FMT: tl.constexpr, MODE: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    X_PER_TOKEN: tl.constexpr, X_FLOAT: tl.constexpr, SPLIT: tl.constexpr, N_SPLITS: tl.constexpr,
    BLOCK_N: tl.constexpr, NG: tl.constexpr,
    P_PAD: tl.constexpr, T_PAD: tl.constexpr, K_PAD: tl.constexpr, ASM: tl.constexpr,
    GDC: tl.constexpr = False, ONE_TOKEN: tl.constexpr = False, EARLY_NEXT: tl.constexpr = False,
):  # fmt: skip
    """See the module docstring. x: X_FLOAT, the float rows [.., K] (quantized here);
    else x's int8 words, with xd and xs its scales and sums (quantize_activation's buffers).
    part: float32 [channels, N_SPLITS, n_pairs, N] (channel 1: up, for GATE_UP); SPLIT: the
    partials go through part and the tickets (several splits, or DOWN), else each program
    writes its pairs' results itself. ONE_TOKEN: a step of one token, whose k slots pick k
    distinct experts: group g is slot g, its expert read from the routing's ids and its one
    pair g, so no grouping entry is read and x's loads need not wait for a pair's.
    EARLY_NEXT: the next launch let in at the program's start (MoeGemvConfig.early_next)."""
    if GDC and EARLY_NEXT:
        gdc_launch_dependents()
    tile = tl.program_id(0)
    split = tl.program_id(1)
    g = tl.program_id(2)
    if ONE_TOKEN:
        n_groups = TOP_K
        expert = tl.load(ids_ptr + g)
        count = 1
    else:
        # the group's entries are loaded with its count, not after it (one memory latency,
        # not two); those past n_groups are unwritten and go unused
        n_groups = tl.load(n_groups_ptr)
        expert = tl.load(group_expert_ptr + g)
        first = tl.load(group_start_ptr + g)
        count = tl.load(group_count_ptr + g)
    if g < n_groups:
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        row_mask = rows < N
        wrow = expert.to(tl.int64) * N + rows
        ge = split * NG + tl.arange(0, NG)  # groups of 32 weights: two runs of 16 each
        group_mask = ge < K // 32
        ua_lo, ua_hi, sa_lo, ca_lo, sa_hi, ca_hi, r_lo, r_hi = load_pairs(
            a0, a1, a2, a3, a4, wrow, row_mask, ge, group_mask, NB, FMT, ASM
        )
        if MODE == 1:
            ub_lo, ub_hi, sb_lo, cb_lo, sb_hi, cb_hi, _, _ = load_pairs(
                b0, b1, b2, b3, b4, wrow, row_mask, ge, group_mask, NB, FMT, ASM
            )
        if GDC:  # a dependent launch: x and every write only after the kernel before ends
            gdc_wait()
        w = tl.arange(0, 4)
        zero_rows = (rows * 0)[:, None]  # x loaded in the weights' [BN, NG] layout
        mask2 = group_mask[None, :] & (zero_rows == 0)
        mask3 = mask2[:, :, None]
        for j in range(count):
            if ONE_TOKEN:  # noqa: SIM108 (a static if)
                pair = g
            else:
                pair = tl.load(order_ptr + first + j)
            if X_PER_TOKEN:  # noqa: SIM108 (a static if)
                x_row = pair // TOP_K
            else:
                x_row = pair
            x_row = x_row.to(tl.int64)
            if X_FLOAT:  # x itself: its runs in 8 bits here, as quantize_activation does it
                words, d, sums = runs_in_8_bits(
                    x_ptr + x_row * K, r_lo, r_hi, group_mask, NG, FMT >= Q8_0
                )
                # in the weights' [BN, NG] layout (Triton moves them there once a pair)
                x_lo, x_hi = tl.split(tl.permute(words, (0, 2, 1)))
                x_lo = tl.broadcast_to(x_lo[None, :, :], (BLOCK_N, NG, 4))
                x_hi = tl.broadcast_to(x_hi[None, :, :], (BLOCK_N, NG, 4))
                dx_lo, dx_hi = tl.split(d)
                dx_lo = tl.broadcast_to(dx_lo[None, :], (BLOCK_N, NG))
                dx_hi = tl.broadcast_to(dx_hi[None, :], (BLOCK_N, NG))
                xs_lo, xs_hi = tl.split(sums)
                xs_lo = tl.broadcast_to(xs_lo[None, :], (BLOCK_N, NG))
                xs_hi = tl.broadcast_to(xs_hi[None, :], (BLOCK_N, NG))
            else:
                words = x_ptr + x_row * (K // 4) + zero_rows[:, :, None] + w[None, None, :]
                x_lo = tl.load(words + r_lo[None, :, None] * 4, mask=mask3, other=0)
                x_hi = tl.load(words + r_hi[None, :, None] * 4, mask=mask3, other=0)
                scales = xd_ptr + x_row * (K // 32) + zero_rows
                dx_lo = tl.load(scales + r_lo[None, :] // 2, mask=mask2, other=0.0)
                dx_hi = tl.load(scales + r_hi[None, :] // 2, mask=mask2, other=0.0)
                sums = xs_ptr + x_row * (K // 16) + zero_rows
                xs_lo = tl.load(sums + r_lo[None, :], mask=mask2, other=0)
                xs_hi = tl.load(sums + r_hi[None, :], mask=mask2, other=0)
            ya_lo = run_sums(ua_lo, sa_lo, ca_lo, x_lo, xs_lo, ASM)
            ya_hi = run_sums(ua_hi, sa_hi, ca_hi, x_hi, xs_hi, ASM)
            ya = group_terms(dx_lo, ya_lo, dx_hi, ya_hi)
            if MODE == 2:  # noqa: SIM108 (a static if) the same bits however h is read
                ya = tree_sum(ya, BLOCK_N, NG)
            else:
                ya = tl.sum(ya, axis=1)
            if MODE == 1:
                yb_lo = run_sums(ub_lo, sb_lo, cb_lo, x_lo, xs_lo, ASM)
                yb_hi = run_sums(ub_hi, sb_hi, cb_hi, x_hi, xs_hi, ASM)
                yb = tl.sum(group_terms(dx_lo, yb_lo, dx_hi, yb_hi), axis=1)
            if SPLIT:
                at = part_ptr + (split * n_pairs + pair) * N + rows
                tl.store(at, ya, mask=row_mask)
                if MODE == 1:
                    tl.store(at + N_SPLITS * n_pairs * N, yb, mask=row_mask)
            else:
                if HAS_BIAS:
                    ya += tl.load(bias_a_ptr + expert * N + rows, mask=row_mask, other=0.0)
                    if MODE == 1:
                        yb += tl.load(bias_b_ptr + expert * N + rows, mask=row_mask, other=0.0)
                if MODE == 1:
                    ya = glu(ya, yb, alpha, limit, ACT)
                tl.store(out_ptr + pair * N + rows, ya.to(out_ptr.dtype.element_ty), mask=row_mask)
        if GDC and not EARLY_NEXT:
            gdc_launch_dependents()
        if SPLIT:
            tl.debug_barrier()
            ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if ticket == N_SPLITS * n_groups - 1:
                _finish_tile(out_ptr, part_ptr, bias_a_ptr, bias_b_ptr, ids_ptr, weights_ptr,
                             rows, row_mask, N, TOP_K, n_pairs, n_tokens, alpha, limit, N_SPLITS,
                             MODE, ACT, HAS_BIAS, P_PAD, T_PAD, K_PAD)  # fmt: skip
                tl.atomic_xchg(count_ptr + tile, 0)


@triton.jit
def _split_sum(at, mask, stride_split, N_SPLITS: tl.constexpr):
    """Partials at `at` summed over the splits, in split order (read past L1: other programs of
    the launch wrote them; every load issued before the first add, the splits being static)."""
    y = tl.zeros(mask.shape, dtype=tl.float32)
    for split in tl.static_range(N_SPLITS):
        y += tl.load(at + split * stride_split, mask=mask, other=0.0, cache_modifier=".cg")
    return y


@triton.jit
def _finish_tile(out_ptr, part_ptr, bias_a_ptr, bias_b_ptr, ids_ptr, weights_ptr, rows,
                 row_mask, N, TOP_K, n_pairs, n_tokens, alpha, limit, N_SPLITS: tl.constexpr,
                 MODE: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
                 P_PAD: tl.constexpr, T_PAD: tl.constexpr, K_PAD: tl.constexpr):  # fmt: skip
    """The last program of a row tile: every pair's partials summed over the splits, then the
    bias, and the activation (GATE_UP) or the routing-weighted sum over the slots (DOWN)."""
    stride_split = n_pairs * N
    if MODE == 2:
        t = tl.arange(0, T_PAD)[:, None]
        token_mask = t < n_tokens
        total = tl.zeros((T_PAD, rows.shape[0]), dtype=tl.float32)
        # slot by slot, one explicit fma each, in a thread's own registers: a sum of products
        # left to tl.sum may be contracted into fmas that differ between the threads of a
        # shuffle (fma(a, b, round(c d)) is not fma(c, d, round(a b))), and which thread's sum
        # is stored depends on the kernel's layout
        for slot in tl.static_range(K_PAD):
            pair = t * TOP_K + slot  # [T_PAD, 1]
            pair_mask = token_mask & (slot < TOP_K)
            mask = pair_mask & row_mask[None, :]
            y = _split_sum(part_ptr + pair * N + rows[None, :], mask, stride_split, N_SPLITS)
            if HAS_BIAS:
                expert = tl.load(ids_ptr + pair, mask=pair_mask, other=0).to(tl.int64)
                y += tl.load(bias_a_ptr + expert * N + rows[None, :], mask=mask, other=0.0)
            weight = tl.load(weights_ptr + pair, mask=pair_mask, other=0.0).to(tl.float32)
            total = tl.fma(y, weight, total)
        tl.store(out_ptr + t * N + rows[None, :], total.to(out_ptr.dtype.element_ty),
                 mask=token_mask & row_mask[None, :])  # fmt: skip
    else:
        pair = tl.arange(0, P_PAD)[:, None]
        pair_mask = pair < n_pairs
        mask = pair_mask & row_mask[None, :]
        at = part_ptr + pair * N + rows[None, :]
        y = _split_sum(at, mask, stride_split, N_SPLITS)
        if HAS_BIAS:
            expert = tl.load(ids_ptr + pair, mask=pair_mask, other=0).to(tl.int64)
            y += tl.load(bias_a_ptr + expert * N + rows[None, :], mask=mask, other=0.0)
        if MODE == 1:
            yb = _split_sum(at + N_SPLITS * stride_split, mask, stride_split, N_SPLITS)
            if HAS_BIAS:
                yb += tl.load(bias_b_ptr + expert * N + rows[None, :], mask=mask, other=0.0)
            y = glu(y, yb, alpha, limit, ACT)
        tl.store(out_ptr + pair * N + rows[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


# one counter per row tile, shared by the launches of a stream (each leaves them at zero)
_COUNTERS = TicketCounters(minimum=4096)


def _runs_per_split(n_runs: int, max_runs: int) -> int:
    """A power of two up to max_runs (the tile's width), the one of max_runs and max_runs / 2
    that leaves fewer masked runs (Qwen3's 128-run rows: one split of 128; gpt-oss's 180: three
    of 64, not two of 128)."""
    if n_runs <= max_runs:
        return triton.next_power_of_2(n_runs)
    half = max(1, max_runs // 2)
    waste = {nr: triton.cdiv(n_runs, nr) * nr - n_runs for nr in (max_runs, half)}
    return min(waste, key=lambda nr: (waste[nr], -nr))


def _x_in_8_bits(x: torch.Tensor, quantized: QuantizedActivation | None,
                 config: MoeGemvConfig | None = None) -> QuantizedActivation:  # fmt: skip
    if quantized is None:  # the GEMV that follows may start early if it is a dependent launch
        return quantize_activation(x, let_next_start=bool((config or MoeGemvConfig()).pdl))
    if quantized.shape != tuple(x.shape):
        raise UnsupportedTensor(
            f"quantized activation of shape {quantized.shape} is not of this input "
            f"{tuple(x.shape)}: quantize the same x that is passed"
        )
    return quantized


def _check(x: torch.Tensor, w: ExpertWeight, routing: ExpertRouting, rows_wanted: int) -> None:
    if w.n_expert != routing.n_expert:
        raise UnsupportedTensor(
            f"routing over {routing.n_expert} experts for a tensor of {w.n_expert}"
        )
    if x.dim() != 2 or x.shape[1] != w.n_in or x.shape[0] != rows_wanted:
        raise UnsupportedTensor(
            f"input of shape {tuple(x.shape)}: expected ({rows_wanted}, {w.n_in}) for this "
            f"{w.fmt} expert tensor and routing"
        )
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise UnsupportedTensor(f"input dtype {x.dtype}: use float16, bfloat16 or float32")


def _launch(x, xq, a: ExpertWeight, b: ExpertWeight | None, routing: ExpertRouting, mode: int,
            act: GluActivation, config: MoeGemvConfig | None,
            one_token: bool) -> torch.Tensor:  # fmt: skip
    """xq: x in 8 bits, or None: the kernel quantizes x (contiguous rows) itself. one_token:
    a step of one token reads its slots' experts from the routing's ids (the kernel's
    ONE_TOKEN); False reads the grouping as a step of several tokens does."""
    # (top_k <= n_expert: the grid's group axis, max_groups, then holds every slot)
    one_token = one_token and routing.n_tokens == 1 and routing.top_k <= routing.n_expert
    cfg = config or default_config(a.fmt, mode, one_token)
    n_out, n_in = a.n_out, a.n_in
    nr = _runs_per_split(n_in // 16, cfg.max_runs)
    n_splits = triton.cdiv(n_in // 16, nr)
    n_tiles = triton.cdiv(n_out, cfg.block_n)
    pairs, tokens, top_k = routing.n_pairs, routing.n_tokens, routing.top_k
    split = n_splits > 1 or mode == DOWN
    device = x.device
    if mode == DOWN:
        out = torch.empty(tokens, n_out, dtype=x.dtype, device=device)
    else:
        out = torch.empty(pairs, n_out, dtype=x.dtype, device=device)
    channels = 2 if mode == GATE_UP else 1
    part = out
    if split:
        part = torch.empty(channels, n_splits, pairs, n_out, dtype=torch.float32, device=device)
    counters = _COUNTERS.get(device, n_tiles)
    pa = plane_args(a.packed)
    pb = plane_args(b.packed) if b is not None else pa
    has_bias = a.bias is not None or (b is not None and b.bias is not None)
    bias_a = bias_b = out
    if has_bias:
        bias_a = a.bias if a.bias is not None else torch.zeros(a.n_expert, n_out, device=device)
        bias_b = bias_a
        if b is not None:
            bias_b = b.bias if b.bias is not None else torch.zeros_like(bias_a)
    weights = routing.weights if routing.weights is not None else routing.ids
    grid = (n_tiles, n_splits, routing.max_groups)
    gdc = cfg.pdl and has_dependent_launch(device)
    extra = {"launch_pdl": True} if gdc else {}
    x_args = (x, x, x) if xq is None else (xq.words, xq.scales, xq.sums)
    _expert_kernel[grid](
        *x_args, out, part, counters, *pa, *pb, bias_a, bias_b,
        routing.order, routing.group_expert, routing.group_start, routing.group_count,
        routing.n_groups, routing.ids, weights,
        n_out, n_in, n_in // a.packed.fmt.block_size, top_k, pairs, tokens,
        float(act.alpha), float(act.limit),
        FMT=FORMAT_CODES[a.fmt], MODE=mode, ACT=_OAI if act.kind == "swiglu_oai" else _SILU,
        HAS_BIAS=has_bias, X_PER_TOKEN=mode != DOWN, X_FLOAT=xq is None, SPLIT=split,
        N_SPLITS=n_splits, BLOCK_N=cfg.block_n, NG=nr // 2,
        P_PAD=triton.next_power_of_2(pairs), T_PAD=triton.next_power_of_2(tokens),
        K_PAD=triton.next_power_of_2(top_k), ASM=not interpret_mode(), GDC=gdc,
        ONE_TOKEN=one_token, EARLY_NEXT=cfg.early_next, num_warps=cfg.num_warps, **extra,
    )  # fmt: skip
    return out


def expert_rows(x: torch.Tensor, w: ExpertWeight, routing: ExpertRouting, *,
                quantized: QuantizedActivation | None = None,
                config: MoeGemvConfig | None = None,
                one_token: bool = True) -> torch.Tensor:  # fmt: skip
    """x [T, n_in] -> [T, k, n_out] in x's dtype: each pair's expert applied to its token
    (plus the expert's bias). quantized: x's 8-bit form, shared with other calls on x.
    one_token=False: a step of one token reads the grouping as others do (for comparing)."""
    require()
    _check(x, w, routing, routing.n_tokens)
    xq = _x_in_8_bits(x, quantized, config)
    out = _launch(x, xq, w, None, routing, ROWS, SILU, config, one_token)
    return out.reshape(routing.n_tokens, routing.top_k, w.n_out)


def expert_gate_up(x: torch.Tensor, gate: ExpertWeight, up: ExpertWeight,
                   routing: ExpertRouting, activation: GluActivation = SILU, *,
                   quantized: QuantizedActivation | None = None,
                   config: MoeGemvConfig | None = None, one_token: bool = True,
                   then: ExpertWeight | None = None) -> torch.Tensor:  # fmt: skip
    """x [T, n_in] -> h [T, k, n_ff] = act(gate, up) of each pair, in x's dtype; one launch
    when gate and up share a block format (each program reads both tiles), else two
    expert_rows launches and the activation in torch. one_token: as expert_rows'. then: the
    down that the next launches compute; where it is moe_down_dp4a.py's (takes_dense_down),
    whose small programs can start beside this launch's last ones, the one launch's default
    shape lets the next launch in as each program starts (early_next: 2.2% of Qwen3-30B-A3B's
    step on an H200, where it cost moe_one_token.py's down 7%: docs/kernels-moe.md)."""
    require()
    _check(x, gate, routing, routing.n_tokens)
    if (up.n_expert, up.n_out, up.n_in) != (gate.n_expert, gate.n_out, gate.n_in):
        raise UnsupportedTensor(
            f"gate experts {(gate.n_expert, gate.n_out, gate.n_in)} and up experts "
            f"{(up.n_expert, up.n_out, up.n_in)} differ in shape"
        )
    xq = _x_in_8_bits(x, quantized, config)
    if gate.fmt != up.fmt:
        g = expert_rows(x, gate, routing, quantized=xq, config=config, one_token=one_token)
        u = expert_rows(x, up, routing, quantized=xq, config=config, one_token=one_token)
        return activation.apply(g.float(), u.float()).to(x.dtype)
    if config is None and then is not None and one_token and takes_dense_down(then, routing):
        config = dataclasses.replace(default_config(gate.fmt, GATE_UP, True), early_next=True)
    out = _launch(x, xq, gate, up, routing, GATE_UP, activation, config, one_token)
    return out.reshape(routing.n_tokens, routing.top_k, gate.n_out)


def expert_down(h: torch.Tensor, w: ExpertWeight, routing: ExpertRouting, *,
                quantized: QuantizedActivation | None = None,
                config: MoeGemvConfig | None = None, one_token: bool = True,
                slots_kernel: bool = True, dense: bool = True) -> torch.Tensor:  # fmt: skip
    """h [T, k, n_in] (expert_gate_up's output) -> [T, n_out] in h's dtype: each pair's down
    projection (plus bias), weighted by its routing weight and summed over the k slots.
    One launch: each program rounds the part of h it reads to 8 bits itself (the bits
    quantize_activation would store); quantized: h in 8 bits already, read as it is.
    A step of one token takes, where w is in device memory: moe_down_dp4a.py's down (one
    integer GEMV over the k experts' rows, h rounded by quantize_activation's launch; config
    then its launch shape, by default dense_down_config) where its formats and shapes allow
    and w has no bias, else moe_one_token.py's down (by default one_token_config) where
    takes_one_token says so, else this module's kernel reading its experts from the ids.
    dense=False skips the first, slots_kernel=False both, one_token=False reads the grouping
    (for comparing)."""
    require()
    if routing.weights is None:
        raise UnsupportedTensor("expert_down needs the routing weights: pass them to route_experts")
    if h.dim() == 3:
        h = h.reshape(-1, h.shape[-1])
    _check(h, w, routing, routing.n_pairs)
    hq = None if quantized is None else _x_in_8_bits(h, quantized, config)
    slots = one_token and slots_kernel and not w.in_host_memory and routing.n_tokens == 1
    if slots and dense and takes_dense_down(w, routing):
        cfg = config or dense_down_config()
        gdc = cfg.pdl and has_dependent_launch(h.device)
        if hq is None:  # a dependent launch of its own, which lets the down in at once
            hq = quantize_activation(h, let_next_start=gdc, after_prior=gdc)
        return moe_down_dp4a.launch_down(hq, w, routing, h.dtype, cfg.block_n, cfg.num_warps,
                                         not interpret_mode(), gdc)  # fmt: skip
    if slots and takes_one_token(routing.n_tokens, routing.top_k, w.n_in, config):
        cfg = config or one_token_config()
        gdc = cfg.pdl and has_dependent_launch(h.device)
        return moe_one_token.launch_down(h.contiguous(), hq, w, routing, FORMAT_CODES[w.fmt],
                                         cfg.block_n, cfg.num_warps, not interpret_mode(),
                                         gdc)  # fmt: skip
    return _launch(h.contiguous(), hq, w, None, routing, DOWN, SILU, config, one_token)
