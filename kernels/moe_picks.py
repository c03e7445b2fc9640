"""A one-token step's top-k picked from the router's scores, and their routing weights: the
picks in the output projection's launch (kernels/router_beside_wo.py), the weights in the FFN
norm's (kernels/norms.py), once it has its 1/rms.

The scores z [n_expert] are the logits up to the norm's positive factor (logits = inv_rms z).
`pick_top_k` picks what the router's launch picks from the logits: the k largest, larger
first, the lower id first on a tie, a NaN as -inf (moe_routing.rank_in_registers' order, slot
s the one ranked s), one max a slot over int64 keys that hold the score's bits made monotonic
and the id's complement. `weights_of_picks` computes the k routing weights from the logits
inv_rms z as moe_routing.take_ranked does (softmax over every expert or over the k,
renormalized over the k where asked: then over the k alone, which is what the renormalized
softmax over every expert comes to).
"""

from __future__ import annotations

import triton.language as tl
from triton import jit

_LOWEST = tl.constexpr(-9223372036854775807 - 1)


@jit
def _ranking_keys(z, E_PAD: tl.constexpr):
    """int64 keys of z [E_PAD]: larger for a larger score, and on a tie for a lower id (a NaN
    as -inf, -0.0 as 0.0)."""
    e = tl.arange(0, E_PAD)
    x = tl.where(z == z, z, float("-inf"))
    x = tl.where(x == 0.0, 0.0, x)
    bits = x.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    return (ordered.to(tl.int64) << 32) | (E_PAD - 1 - e).to(tl.int64)


@jit
def _take_best(key, valid, E_PAD: tl.constexpr):
    """(the id of the largest key among `valid`, its score, `valid` without it)."""
    e = tl.arange(0, E_PAD)
    best = tl.max(tl.where(valid, key, _LOWEST), axis=0)
    pick = E_PAD - 1 - (best & 0xFFFFFFFF).to(tl.int32)
    top = (best >> 32).to(tl.int32)
    top = tl.where(top >= 0, top, top ^ 0x7FFFFFFF).to(tl.float32, bitcast=True)
    return pick, top, valid & (e != pick)


@jit
def pick_top_k(z, ids_ptr, top_ptr, n_expert, K: tl.constexpr, E_PAD: tl.constexpr):
    """Store the top K of z [E_PAD] (entries past n_expert ignored) in ids [K] (int32) and
    their scores in top [K] (float32, a NaN as -inf)."""
    key = _ranking_keys(z, E_PAD)
    valid = tl.arange(0, E_PAD) < n_expert
    for slot in tl.static_range(K):
        pick, top, valid = _take_best(key, valid, E_PAD)
        tl.store(ids_ptr + slot, pick)
        tl.store(top_ptr + slot, top)


@jit
def weights_of_picks(z_ptr, top_ptr, weights_ptr, inv_rms, n_expert, K: tl.constexpr,
                     K_PAD: tl.constexpr, E_PAD: tl.constexpr, SOFTMAX_ALL: tl.constexpr,
                     NORMALIZE: tl.constexpr):  # fmt: skip
    """Store the routing weights [K] of the picks whose scores are top [K] (pick_top_k's), from
    the logits inv_rms z: each pick's exp over their sum, or over every expert's where the
    softmax is over all of them and not renormalized (z [n_expert] read then). Read past L1:
    another launch wrote them."""
    s = tl.arange(0, K_PAD)
    picked = s < K
    logits = tl.load(top_ptr + s, mask=picked, other=float("-inf"), cache_modifier=".cg")
    logits = logits * inv_rms
    top = tl.max(logits, axis=0)
    top = tl.where(top == float("-inf"), 0.0, top)
    chosen = tl.where(picked, tl.exp(logits - top), 0.0)
    if SOFTMAX_ALL and not NORMALIZE:
        e = tl.arange(0, E_PAD)
        z = tl.load(z_ptr + e, mask=e < n_expert, other=float("-inf"), cache_modifier=".cg")
        total = tl.sum(tl.exp(tl.where(z == z, z, float("-inf")) * inv_rms - top), axis=0)
    else:
        total = tl.sum(chosen, axis=0)
    tl.store(weights_ptr + s, chosen / total, mask=picked)
