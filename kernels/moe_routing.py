"""The (token, slot) pairs of a mixture-of-experts step grouped by expert, on the GPU, in one
launch.

A step of T tokens with top-k routing has P = T k pairs p = t k + s, pair p picking expert
ids[t, s]. The expert GEMV (kernels/moe_gemv.py) runs one program per (expert picked, tile of
weight rows), which reads its expert's tile once and applies it to every pair that picked the
expert. `route_experts` computes what those programs need, without a host sync (so a decode
step can be captured in a CUDA graph):

    order[P]           the pair indices sorted by expert (stable: by pair within an expert)
    group_expert[G]    the g-th distinct expert picked, in increasing id order
    group_start[G]     where its pairs begin in `order`
    group_count[G]     how many pairs picked it (at most T: a token picks an expert once)
    n_groups[1]        how many distinct experts were picked; G = min(n_expert, P) is the
                       bound the launch grid uses, entries past n_groups are left unwritten

One program over all P pairs (P <= MAX_PAIRS) computes each pair's rank by comparing it with
every other pair, 16 pairs at a time ([P, 16] tables, so the registers stay bounded): for the
8..128 pairs of a decode or draft step a few thousand comparisons, cheaper than the several
launches of a torch sort and its bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor

MAX_PAIRS = 256


@triton.jit
def _group_pairs_kernel(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, P,
                        P_PAD: tl.constexpr, CHUNK: tl.constexpr):  # fmt: skip
    """Pairs i (all P, down the rows) against pairs j (CHUNK at a time, across)."""
    i = tl.arange(0, P_PAD)
    valid = i < P
    ids = tl.load(ids_ptr + i, mask=valid, other=0).to(tl.int32)
    mine = ids[:, None]
    start = tl.zeros_like(i)  # pairs of smaller experts: where i's expert's pairs begin
    before = tl.zeros_like(i)  # pairs of i's expert before i
    count = tl.zeros_like(i)  # pairs of i's expert
    group = tl.zeros_like(i)  # distinct experts smaller than i's: its group
    for j0 in range(0, P_PAD, CHUNK):
        j = j0 + tl.arange(0, CHUNK)
        other = tl.load(ids_ptr + j, mask=j < P, other=0).to(tl.int32)
        counted = (j < P)[None, :]
        less = counted & (other[None, :] < mine)
        same = counted & (other[None, :] == mine)
        start += tl.sum(less.to(tl.int32), axis=1)
        before += tl.sum((same & (j[None, :] < i[:, None])).to(tl.int32), axis=1)
        count += tl.sum(same.to(tl.int32), axis=1)
        # whether each j is the first pair of its expert: no pair before it has its expert
        # ([CHUNK, P_PAD]: j down the rows here)
        repeats = (ids[None, :] == other[:, None]) & (i[None, :] < j[:, None]) & valid[None, :]
        j_first = tl.sum(repeats.to(tl.int32), axis=1) == 0
        group += tl.sum((less & j_first[None, :]).to(tl.int32), axis=1)
    rank = start + before
    tl.store(order_ptr + rank, i, mask=valid)
    leads = valid & (before == 0)
    tl.store(expert_ptr + group, ids, mask=leads)
    tl.store(start_ptr + group, start, mask=leads)
    tl.store(count_ptr + group, count, mask=leads)
    tl.store(n_groups_ptr + i, tl.zeros_like(i) + tl.sum(leads.to(tl.int32), axis=0), mask=i < 1)


@dataclass(frozen=True)
class ExpertRouting:
    """One step's routing, grouped by expert (module docstring). ids and weights are the
    caller's [T, k] tensors (contiguous); the rest are int32 on the same device."""

    ids: torch.Tensor
    weights: torch.Tensor | None
    n_expert: int
    order: torch.Tensor
    group_expert: torch.Tensor
    group_start: torch.Tensor
    group_count: torch.Tensor
    n_groups: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return self.ids.shape[0]

    @property
    def top_k(self) -> int:
        return self.ids.shape[1]

    @property
    def n_pairs(self) -> int:
        return self.ids.numel()

    @property
    def max_groups(self) -> int:
        """The most distinct experts a step can pick: the launch grid's group axis."""
        return min(self.n_expert, self.n_pairs)


def route_experts(ids: torch.Tensor, weights: torch.Tensor | None, n_expert: int) -> ExpertRouting:
    """ids [T, k] (any integer dtype, each in 0..n_expert-1: not checked on the device) and
    the routing weights [T, k] (needed only by the down projection's sum) -> ExpertRouting.
    Compute it once a layer and step: the gate/up and the down launches share it."""
    require()
    if ids.dim() != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise UnsupportedTensor(f"expert ids of shape {tuple(ids.shape)}: pass [tokens, top_k]")
    if ids.dtype.is_floating_point:
        raise UnsupportedTensor(f"expert ids of dtype {ids.dtype}: pass an integer tensor")
    if weights is not None and tuple(weights.shape) != tuple(ids.shape):
        raise UnsupportedTensor(
            f"routing weights of shape {tuple(weights.shape)} do not match the expert ids' "
            f"{tuple(ids.shape)}"
        )
    n_pairs = ids.numel()
    if n_pairs > MAX_PAIRS:
        raise UnsupportedTensor(
            f"{ids.shape[0]} tokens x top-{ids.shape[1]} = {n_pairs} pairs: the expert GEMV "
            f"takes at most {MAX_PAIRS} a launch; split the tokens into smaller chunks"
        )
    ids = ids.contiguous()
    groups = min(n_expert, n_pairs)
    buffers = torch.empty(n_pairs + 3 * groups + 1, dtype=torch.int32, device=ids.device)
    sizes = [n_pairs, groups, groups, groups, 1]
    order, expert, start, count, n_groups = torch.split(buffers, sizes)
    _group_pairs_kernel[(1,)](
        ids, order, expert, start, count, n_groups, n_pairs,
        P_PAD=max(16, triton.next_power_of_2(n_pairs)), CHUNK=16, num_warps=4,
    )  # fmt: skip
    return ExpertRouting(
        ids, None if weights is None else weights.contiguous(), n_expert, order, expert, start,
        count, n_groups,
    )  # fmt: skip
