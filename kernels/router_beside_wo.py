"""A MoE layer's router scores computed between the attention and its output projection, and
the top-k picked beside the projection, in its launch.

The router of a MoE layer reads the FFN norm's output y = g h / rms(h), h = r + Wo a (+ bo):
r the residual, a the attention's output, Wo the output projection, g the norm's weight. Its
logits are

    Wr y = (1 / rms(h)) z,    z = (Wr g) r + ((Wr g) Wo) a + (Wr g) bo

and 1 / rms(h) > 0, so the top-k of z is the top-k of the logits. z needs neither the norm
nor Wo's output: `fold_router` makes the folded rows [Wr g | (Wr g) Wo] (float16, one row an
expert) and the offset (Wr g) bo at load. `router_scores` computes z in parts, in a launch
of its own between the attention's reduce and the output projection: a program a tile of
SCORES_ROWS router rows and split of SPLIT_COLUMNS columns reads its part of the folded rows
before its wait (while the reduce runs) and of r or of a's 8-bit form (what the reduce writes
for wo's GEMV) after it, and stores a partial; it lets wo's launch in at once. `wo_and_scores`
launches the output projection's integer GEMV (gemv_dp4a.gemv_program, unchanged) with one
more program, which adds the partials to the offset and picks the top k
(moe_picks.pick_top_k) beside the GEMV's programs. The FFN norm computes the k routing weights
from the picks' scores and its 1/rms (kernels/norms.py, moe_picks.weights_of_picks), and the
expert GEMV's one-token kernels, two launches after wo's, read the picks before their wait
(the down its weights too): a decode step of one token has no router launch after wo's, and
the gate/up's weight loads overlap the norm.

Arithmetic. a enters as the GEMV reads it (8 bits per 32 values and their scale), so z is the
logits of the projection's own output up to rounding: float32 sums of the float16 folded rows,
where the router's launch multiplies the float32 router by y rounded to the activations'
dtype. The two can order a near-tie differently (llama.cpp's own sums differ from both);
tests/kernels/test_router_beside_wo.py bounds the difference in the scores.

Memory: n_expert (n_embd + n_in) float16 a layer (Qwen3-30B-A3B: 1.5 MiB, 72 MiB in all),
which the planner counts (kernels/moe_one_token_rule.py says which layers fold).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.act_quant import QuantizedActivation
from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.gemv import GemvConfig, dp4a_buffers
from kernels.gemv_dp4a import gemv_program, launch_args
from kernels.launch import gdc_launch_dependents, gdc_wait, has_dependent_launch
from kernels.moe_one_token_rule import WO_FORMATS, folded_bytes
from kernels.moe_picks import pick_top_k
from kernels.packed_weight import PackedWeight

# the folded rows' largest magnitude: float16's largest finite value with room for rounding
F16_LIMIT = 60000.0


@dataclass(frozen=True)
class FoldedRouter:
    """rows [n_expert, n_embd + n_in] float16: (Wr g) then (Wr g) Wo; offset [n_expert]
    float32: (Wr g) bo, zeros without an output bias."""

    rows: torch.Tensor
    offset: torch.Tensor
    n_embd: int
    n_in: int

    @property
    def n_expert(self) -> int:
        return self.rows.shape[0]

    @property
    def nbytes(self) -> int:
        return sum(folded_bytes(self.n_expert, self.n_embd, self.n_in))


def fold_router(router: torch.Tensor, norm_weight: torch.Tensor, wo: torch.Tensor,
                bias: torch.Tensor | None = None, *,
                chunk: int = 1024) -> FoldedRouter:  # fmt: skip
    """The FoldedRouter of a router [n_expert, n_embd], the FFN norm's weight [n_embd], the
    output projection wo [n_embd, n_in] (dequantized, any float dtype) and its bias [n_embd]
    or None, on wo's device. The product in float64, wo's columns `chunk` at a time (a few
    MiB at a time beside wo). UnsupportedTensor where a folded value is past float16's range."""
    n_expert, n_embd = router.shape
    if tuple(norm_weight.shape) != (n_embd,) or wo.dim() != 2 or wo.shape[0] != n_embd:
        raise UnsupportedTensor(
            f"router {tuple(router.shape)}, norm weight {tuple(norm_weight.shape)} and output "
            f"projection {tuple(wo.shape)} do not fold: expected ({n_embd},) and ({n_embd}, n)"
        )
    device = wo.device
    scaled = router.to(device, torch.float64) * norm_weight.to(device, torch.float64)[None, :]
    n_in = wo.shape[1]
    rows = torch.empty(n_expert, n_embd + n_in, dtype=torch.float16, device=device)
    largest = scaled.abs().max().item() if scaled.numel() else 0.0
    rows[:, :n_embd] = scaled.to(torch.float16)
    for start in range(0, n_in, chunk):
        part = scaled @ wo[:, start : start + chunk].to(torch.float64)
        largest = max(largest, part.abs().max().item())
        rows[:, n_embd + start : n_embd + start + part.shape[1]] = part.to(torch.float16)
    if not largest < F16_LIMIT:  # (a NaN too)
        raise UnsupportedTensor(
            f"the folded router reaches {largest:.3g}, past float16's range: keep the router"
        )
    offset = torch.zeros(n_expert, dtype=torch.float32, device=device)
    if bias is not None:
        offset = (scaled @ bias.to(device, torch.float64)).to(torch.float32)
    return FoldedRouter(rows, offset, n_embd, n_in)


@triton.jit
def _scores_kernel(rows_ptr, r_ptr, xq_ptr, xd_ptr, part_ptr, n_expert, n_embd, n_in,
                   n_r_splits, BLOCK_E: tl.constexpr, SPLIT: tl.constexpr,
                   GDC: tl.constexpr):  # fmt: skip
    """Program q: BLOCK_E router rows (tile q % cdiv(n_expert, BLOCK_E)) x split q // that of
    SPLIT columns of their folded rows (the first n_r_splits over r, the rest over a's groups
    of 32), loaded before the wait (GDC: a dependent launch of the attention's reduce, which
    lets the output projection's launch in at once); the partials stored in part [n_splits,
    n_expert]."""
    q = tl.program_id(0)
    n_tiles_e = tl.cdiv(n_expert, BLOCK_E)
    split = q // n_tiles_e
    e = (q % n_tiles_e) * BLOCK_E + tl.arange(0, BLOCK_E)
    in_e = e < n_expert
    row = rows_ptr + e.to(tl.int64)[:, None] * (n_embd + n_in)  # [BLOCK_E, 1]
    # (names of their own in each branch: Triton types a name set in both alike)
    if split < n_r_splits:  # columns of r
        cols = split * SPLIT + tl.arange(0, SPLIT)
        in_r = cols < n_embd
        w_r = tl.load(row + cols[None, :], mask=in_e[:, None] & in_r[None, :], other=0.0)
        _let_in_and_wait(GDC)
        r = tl.load(r_ptr + cols, mask=in_r, other=0.0).to(tl.float32)
        part = tl.sum(w_r.to(tl.float32) * r[None, :], axis=1)
    else:  # groups of 32 of a, in its 8-bit form
        G: tl.constexpr = SPLIT // 32
        g = (split - n_r_splits) * G + tl.arange(0, G)
        in_a = g < n_in // 32
        word = g[:, None] * 8 + tl.arange(0, 8)[None, :]  # [G, 8]: 4 values a word
        byte = tl.arange(0, 4)
        at = n_embd + word[:, :, None] * 4 + byte[None, None, :]  # [G, 8, 4]
        mask = in_e[:, None, None, None] & in_a[None, :, None, None]
        w_a = tl.load(row[:, :, None, None] + at[None], mask=mask, other=0.0)
        _let_in_and_wait(GDC)
        words = tl.load(xq_ptr + word, mask=in_a[:, None], other=0)
        codes = ((words[:, :, None] << (24 - 8 * byte)[None, None, :]) >> 24).to(tl.float32)
        d = tl.load(xd_ptr + g, mask=in_a, other=0.0)
        per_group = tl.sum(tl.sum(w_a.to(tl.float32) * codes[None], axis=3), axis=2)
        part = tl.sum(d[None, :] * per_group, axis=1)
    tl.store(part_ptr + split * n_expert + e, part, mask=in_e)


@triton.jit
def _let_in_and_wait(GDC: tl.constexpr):
    if GDC:
        gdc_launch_dependents()
        gdc_wait()


@triton.jit
def _picks_program(parts_ptr, offset_ptr, scores_ptr, ids_ptr, top_ptr, n_expert, n_parts,
                   P_PAD: tl.constexpr, K: tl.constexpr, E_PAD: tl.constexpr,
                   GDC: tl.constexpr, EARLY_NEXT: tl.constexpr):  # fmt: skip
    """After the wait: z = offset + the partial scores (parts [n_parts, n_expert], the scores
    launch's), stored, and its top K picked into ids and top (moe_picks.pick_top_k)."""
    if GDC:
        if EARLY_NEXT:
            gdc_launch_dependents()
        gdc_wait()
    e = tl.arange(0, E_PAD)
    valid = e < n_expert
    p = tl.arange(0, P_PAD)
    parts = tl.load(parts_ptr + p[:, None] * n_expert + e[None, :],
                    mask=(p < n_parts)[:, None] & valid[None, :], other=0.0)  # fmt: skip
    z = tl.load(offset_ptr + e, mask=valid, other=0.0) + tl.sum(parts, axis=0)
    tl.store(scores_ptr + e, z, mask=valid)
    pick_top_k(z, ids_ptr, top_ptr, n_expert, K, E_PAD)
    if GDC and not EARLY_NEXT:
        gdc_launch_dependents()


@triton.jit
def _wo_and_picks_kernel(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3,
    N, NB, n_rows_x, stride_ob, blocks_per_split, n_splits, n_tiles, steps_per_tile,
    parts_ptr, offset_ptr, scores_ptr, ids_ptr, top_ptr, n_expert, n_parts,
    BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, SPLIT_K: tl.constexpr,
    Q6: tl.constexpr, ONE_STEP: tl.constexpr, GDC: tl.constexpr, EARLY_NEXT: tl.constexpr,
    ASM: tl.constexpr, RIT: tl.constexpr, P_PAD: tl.constexpr, K: tl.constexpr,
    E_PAD: tl.constexpr,
):  # fmt: skip
    """Programs 0..n_tiles - 1: the GEMV's (gemv_dp4a.gemv_program); program n_tiles: the
    picks (_picks_program)."""
    t = tl.program_id(0)
    if t < n_tiles:
        gemv_program(xq_ptr, xd_ptr, xs_ptr, out_ptr, part_ptr, count_ptr, p0, p1, p2, p3, N,
                     NB, n_rows_x, stride_ob, blocks_per_split, n_splits, n_tiles,
                     steps_per_tile, BLOCK_N, NBLK, EVEN, SPLIT_K, Q6, ONE_STEP, GDC,
                     EARLY_NEXT, ASM, RIT)  # fmt: skip
    else:
        _picks_program(parts_ptr, offset_ptr, scores_ptr, ids_ptr, top_ptr, n_expert, n_parts,
                       P_PAD, K, E_PAD, GDC, EARLY_NEXT)  # fmt: skip


# rows x columns of the folded rows a program of the scores launch: Qwen3-30B-A3B's 128 x
# (2048 + 4096) in 32 x 6 programs
SCORES_ROWS = 4
SPLIT_COLUMNS = 1024


def router_scores(quantized: QuantizedActivation, folded: FoldedRouter,
                  residual: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The router's partial scores [n_splits, n_expert] float32 (z = folded.offset + their sum
    over splits: wo_and_scores' picking program adds them) of one row a [1, n_in] in its
    8-bit form (the attention's reduce writes it, for wo's GEMV) and the residual [1, n_embd],
    in one launch (a dependent launch on sm_90+: its folded rows read while the reduce
    runs)."""
    require()
    if quantized.shape != (1, folded.n_in) or residual.numel() != folded.n_embd:
        raise UnsupportedTensor(
            f"router scores of a {quantized.shape} activation and a residual of "
            f"{residual.numel()}: the router was folded for one row of {folded.n_in} beside "
            f"{folded.n_embd}"
        )
    device = residual.device
    n_r_splits = triton.cdiv(folded.n_embd, SPLIT_COLUMNS)
    n_splits = n_r_splits + triton.cdiv(folded.n_in, SPLIT_COLUMNS)
    parts = torch.empty(n_splits, folded.n_expert, dtype=torch.float32, device=device)
    r = residual.reshape(-1)
    r = r if r.stride(0) == 1 else r.contiguous()
    gdc = has_dependent_launch(device)
    grid = (triton.cdiv(folded.n_expert, SCORES_ROWS) * n_splits,)
    _scores_kernel[grid](
        folded.rows, r, quantized.words, quantized.scales, parts, folded.n_expert,
        folded.n_embd, folded.n_in, n_r_splits, BLOCK_E=SCORES_ROWS, SPLIT=SPLIT_COLUMNS,
        GDC=gdc, num_warps=2, **({"launch_pdl": True} if gdc else {}),
    )  # fmt: skip
    return parts


@dataclass(frozen=True)
class ScoresBeside:
    """wo_and_scores' routing: the scores z [n_expert] float32, the top-k ids [1, k] int32 and
    their scores top [1, k] float32."""

    scores: torch.Tensor
    ids: torch.Tensor
    top: torch.Tensor


def wo_and_scores(x: torch.Tensor, w: PackedWeight, quantized: QuantizedActivation | None,
                  parts: torch.Tensor, offset: torch.Tensor, top_k: int,
                  config: GemvConfig) -> tuple[torch.Tensor, ScoresBeside]:  # fmt: skip
    """(x @ w.T [1, n_out] in x's dtype, the router's scores and top_k picks: ScoresBeside)
    for one row x [1, n_in] (its 8-bit form `quantized`, or None: quantized in a launch of its
    own), from the partial scores `parts` [n_parts, n_expert] (router_scores') and the folded
    router's offset [n_expert], in one launch: the integer GEMV's programs and one that picks.
    w: a WO_FORMATS matrix; config: the integer GEMV's (kernels.gemv.integer_config)."""
    require()
    x2 = x.reshape(-1, x.shape[-1])
    if x2.shape[0] != 1 or w.fmt.name not in WO_FORMATS or config.path != "dp4a":
        raise UnsupportedTensor(
            f"scores beside a projection take one row through the integer GEMV of "
            f"{', '.join(WO_FORMATS)}, not {x2.shape[0]} rows of {w.fmt.name} ({config.path})"
        )
    n_parts, n_expert = parts.shape
    if offset.numel() != n_expert or not 1 <= top_k <= n_expert:
        raise UnsupportedTensor(
            f"top-{top_k} of scores in parts {tuple(parts.shape)} and an offset of {offset.numel()}"
        )
    if quantized is not None and quantized.shape != tuple(x2.shape):
        raise UnsupportedTensor(
            f"quantized activation of shape {quantized.shape} is not of this input "
            f"{tuple(x2.shape)}: quantize the same x that is passed"
        )
    x2 = x2.contiguous()
    device = x.device
    cfg, plan, out, part, counters = dp4a_buffers(x2, w, config)
    n_tiles, args, flags = launch_args(w, x2, quantized, out, part, counters, plan, cfg)
    z = torch.empty(n_expert, dtype=torch.float32, device=device)
    ids = torch.empty(1, top_k, dtype=torch.int32, device=device)
    top = torch.empty(1, top_k, dtype=torch.float32, device=device)
    _wo_and_picks_kernel[(n_tiles + 1,)](
        *args, parts, offset, z, ids, top, n_expert, n_parts,
        P_PAD=triton.next_power_of_2(n_parts), K=top_k, E_PAD=triton.next_power_of_2(n_expert),
        **flags,
    )  # fmt: skip
    return out, ScoresBeside(z, ids, top)
