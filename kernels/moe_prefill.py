"""Mixture-of-experts feed-forward for a prefill chunk: tensor-core matmuls over the experts'
weights dequantized a slice of experts at a time.

    out[t] = sum_s weights[t, s] (down[e] act(gate[e] x[t] + bg[e], up[e] x[t] + bu[e]) + bd[e])
    with e = ids[t, s]

Why not the expert GEMV (moe_gemv.py): a chunk of hundreds of tokens picks nearly every expert,
each by tens of tokens, and the GEMV's integer dot products then do tens of times the work of
its weight reads (a 512-token chunk of a Qwen3-30B-A3B-shaped model: 330 ms on an H200, where
llama.cpp's grouped matmul takes 71). Here the pairs are sorted by expert (one read of the
counts to the host: a prefill is not a captured graph), the tokens of each expert gathered
into rows padded to the most any expert got, and each slice of `experts_per_slice` experts is
dequantized to f16 (kernels/dequant.py) and multiplied by torch.bmm: every weight is read once
a chunk, the products run on tensor cores, and the f16 copy and the padded rows cost a slice's
worth of memory (at most SCRATCH_BYTES, fewer experts a slice the more rows the busiest expert
has; `workspace_bytes`), not the layer's. The routing-weighted sum over the slots is a
scatter of the pairs back to token order and a sum in slot order, so the result does not
depend on the slicing.
"""

from __future__ import annotations

import dataclasses

import torch

from kernels.dequant import dequantize
from kernels.errors import UnsupportedTensor
from kernels.moe_gemv import SILU, ExpertWeight, GluActivation

# bytes one slice of experts may hold: their f16 weights (gate, up, down) and the slice's
# activations (padded inputs, gate/up/down outputs)
SCRATCH_BYTES = 256 << 20


def _expert_bytes(gate: ExpertWeight, down: ExpertWeight, most: int) -> int:
    """One expert's share of a slice for `most` rows: its f16 gate, up and down, the f16 inputs,
    float32 gate and up, f16 h and the float32 output."""
    weights = 2 * (2 * gate.n_out * gate.n_in + down.n_out * down.n_in)
    rows = most * (2 * gate.n_in + (4 + 4 + 2) * gate.n_out + 4 * down.n_out)
    return weights + rows


def experts_per_slice(gate: ExpertWeight, down: ExpertWeight, most: int,
                      budget: int = SCRATCH_BYTES) -> int:  # fmt: skip
    """How many experts a slice takes when an expert has at most `most` rows (at least one)."""
    return max(1, min(gate.n_expert, budget // _expert_bytes(gate, down, most)))


def workspace_bytes(n_in: int, n_ff: int, n_out: int, n_expert: int, tokens: int, top_k: int,
                    budget: int = SCRATCH_BYTES) -> int:  # fmt: skip
    """The most moe_prefill holds for `tokens` tokens of top_k pairs (n_in inputs, n_ff of
    gate and up, n_out outputs): a slice (at most `budget`, or one expert's share where that
    alone is more, its rows padded to the worst case: every token picking the same expert)
    and the pairs' inputs (f16) and outputs (float32, by expert and in token order)."""
    one = 2 * (2 * n_ff * n_in + n_out * n_ff) + tokens * (2 * n_in + 10 * n_ff + 4 * n_out)
    pairs = tokens * top_k
    return max(min(budget, n_expert * one), one) + pairs * (2 * n_in + 8 * n_out)


def _experts(w: ExpertWeight, first: int, count: int, dtype: torch.dtype) -> torch.Tensor:
    """Experts first .. first + count - 1 of w as `dtype` [count, n_out, n_in]."""
    rows = slice(first * w.n_out, (first + count) * w.n_out)
    planes = {name: plane[rows] for name, plane in w.packed.planes.items()}
    part = dataclasses.replace(w.packed, n_out=count * w.n_out, planes=planes)
    return dequantize(part, dtype).reshape(count, w.n_out, w.n_in)


def moe_prefill(
    x: torch.Tensor,
    gate: ExpertWeight,
    up: ExpertWeight,
    down: ExpertWeight,
    ids: torch.Tensor,
    weights: torch.Tensor,
    activation: GluActivation = SILU,
    *,
    dtype: torch.dtype = torch.float16,
    budget: int = SCRATCH_BYTES,
) -> torch.Tensor:
    """x [T, n_embd], ids and weights [T, k] -> [T, n_embd] in x's dtype (module docstring).
    dtype: the matmuls' (f16 on a GPU; float32 where the CPU runs it)."""
    n_tokens, top_k = ids.shape
    n_expert = gate.n_expert
    if x.dim() != 2 or x.shape[0] != n_tokens or x.shape[1] != gate.n_in:
        raise UnsupportedTensor(
            f"input of shape {tuple(x.shape)} for {n_tokens} tokens of {gate.n_in} values"
        )
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    by_expert = flat[order]
    counts = torch.bincount(flat, minlength=n_expert)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(flat.numel(), device=x.device) - starts[by_expert]
    counts_host = counts.tolist()  # the one read back: which slices have work, and the padding
    most = max(counts_host)
    rows = x.to(dtype)[order // top_k]  # the pairs' inputs, by expert
    pair_out = torch.empty(flat.numel(), down.n_out, dtype=torch.float32, device=x.device)
    step = experts_per_slice(gate, down, most, budget)
    for first in range(0, n_expert, step):
        count = min(step, n_expert - first)
        if not any(counts_host[first : first + count]):
            continue
        in_slice = (by_expert >= first) & (by_expert < first + count)
        local = by_expert[in_slice] - first
        padded = torch.zeros(count, most, gate.n_in, dtype=dtype, device=x.device)
        padded[local, slot[in_slice]] = rows[in_slice]
        g = torch.bmm(padded, _experts(gate, first, count, dtype).transpose(1, 2)).float()
        u = torch.bmm(padded, _experts(up, first, count, dtype).transpose(1, 2)).float()
        if gate.bias is not None:
            g += gate.bias[first : first + count, None, :]
        if up.bias is not None:
            u += up.bias[first : first + count, None, :]
        h = activation.apply(g, u).to(dtype)
        y = torch.bmm(h, _experts(down, first, count, dtype).transpose(1, 2)).float()
        if down.bias is not None:
            y += down.bias[first : first + count, None, :]
        pair_out[in_slice] = y[local, slot[in_slice]]
    pair_out *= weights.reshape(-1).float()[order, None]
    out = torch.empty_like(pair_out)
    out[order] = pair_out
    return out.reshape(n_tokens, top_k, down.n_out).sum(dim=1).to(x.dtype)
