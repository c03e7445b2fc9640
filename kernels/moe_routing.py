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

One program over all P pairs (P <= MAX_PAIRS), by one of two methods:
    sort     the keys expert P_PAD + pair sorted (tl.sort: stable by construction), the
             groups from the histogram of the experts and its prefix sums; time nearly flat
             in P (on an H200: 2.0-2.1 us at 8 pairs, 2.6-2.7 us at 128)
    compare  each pair's rank counted by comparing it with every other pair, 16 pairs at a
             time; 1.5-1.6 us at 8 pairs, but 18 us at 128
route_experts takes "compare" up to COMPARE_UP_TO pairs (decode: top-8 of one or two tokens),
"sort" above.

From the router's logits, `select_and_route` picks each token's top-k in that same program
first, by one of two methods (the same picks, slots and weights):
    rank     every (token, expert) score's rank among its token's scores counted against all
             the others at once (larger first, lower id on a tie), the top-k those below k,
             and the groups from the count of tokens per expert and its prefix sums: no serial
             step past the comparisons; T_PAD E_PAD n_expert comparisons, held a step at a
             time in registers, so taken up to RANK_UP_TO entries T_PAD E_PAD (a decode step
             of either model)
    argmax   the k largest one at a time (k reductions over the experts, then the grouping of
             the ids read back as route_experts groups them); its work grows with k, not T.
The router's GEMV fused with that selection and grouping (route_from_router, norm_and_route)
is kernels/moe_router.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor

MAX_PAIRS = 256
COMPARE_UP_TO = 16  # pairs; more are sorted (docs/decisions/0019-moe-routing-and-launch.md)
# selection by rank up to this many (token, expert) entries, T_PAD x E_PAD (Qwen3's 128
# experts up to 2 tokens, gpt-oss's 32 up to 8), by k argmaxes past it: each thread holds a
# step's comparisons, T_PAD x 16 x E_PAD / 128 of them (sm_90, Triton 3.6: 64 registers at
# 2 Qwen3 tokens, 251 at 16 gpt-oss tokens, spills at 64)
RANK_UP_TO = 256


@triton.jit
def _group_by_sorting(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, P,
                      n_expert, P_PAD: tl.constexpr, E_PAD: tl.constexpr):  # fmt: skip
    """One program: the order by sorting the keys expert P_PAD + pair (so the sort is stable),
    the groups from the histogram of the experts (start: its exclusive prefix sum; group: the
    exclusive prefix count of the experts present)."""
    i = tl.arange(0, P_PAD)
    valid = i < P
    ids = tl.load(ids_ptr + i, mask=valid, other=0).to(tl.int32)
    keys = tl.where(valid, ids * P_PAD + i, n_expert * P_PAD + i)  # padding sorts last
    order = tl.sort(keys) % P_PAD
    tl.store(order_ptr + i, order, mask=valid)
    e = tl.arange(0, E_PAD)
    counts = tl.histogram(tl.where(valid, ids, n_expert), E_PAD)  # bin n_expert: the padding
    present = ((counts > 0) & (e < n_expert)).to(tl.int32)
    counts = counts * present
    group = tl.cumsum(present, 0) - present
    leads = present > 0
    tl.store(expert_ptr + group, e, mask=leads)
    tl.store(start_ptr + group, tl.cumsum(counts, 0) - counts, mask=leads)
    tl.store(count_ptr + group, counts, mask=leads)
    tl.store(n_groups_ptr + e, tl.zeros_like(e) + tl.sum(present, axis=0), mask=e < 1)


@triton.jit
def _group_pairs_by_sorting_kernel(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr,
                                   n_groups_ptr, P, n_expert, P_PAD: tl.constexpr,
                                   E_PAD: tl.constexpr):  # fmt: skip
    _group_by_sorting(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, P,
                      n_expert, P_PAD, E_PAD)  # fmt: skip


@triton.jit
def _group_by_comparison(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, P,
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


@triton.jit
def _group_pairs_by_comparison_kernel(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr,
                                      n_groups_ptr, P, P_PAD: tl.constexpr,
                                      CHUNK: tl.constexpr):  # fmt: skip
    _group_by_comparison(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, P,
                         P_PAD, CHUNK)  # fmt: skip


@triton.jit
def select_and_group(x, ids_ptr, weights_ptr, order_ptr, expert_ptr, start_ptr, count_ptr,
                      n_groups_ptr, T, n_expert, K: tl.constexpr, K_PAD: tl.constexpr,
                      T_PAD: tl.constexpr, E_PAD: tl.constexpr, P_PAD: tl.constexpr,
                      SOFTMAX_ALL: tl.constexpr, NORMALIZE: tl.constexpr,
                      SORT: tl.constexpr):  # fmt: skip
    """One program: each token's k experts from its router logits x [T_PAD, E_PAD] (float32,
    -inf past T tokens and n_expert experts), stored, then grouped by expert as route_experts
    does. The k largest are taken one at a time (the largest left, lowest id on a tie, then
    masked); the softmax over all experts keeps their order, so both gatings take the k
    largest logits and differ only in the weights."""
    t = tl.arange(0, T_PAD)[:, None]
    e = tl.arange(0, E_PAD)[None, :]
    slot = tl.arange(0, K_PAD)[None, :]
    ids = tl.zeros((T_PAD, K_PAD), tl.int32)
    top = tl.full((T_PAD, K_PAD), float("-inf"), tl.float32)
    scores = x
    for j in tl.static_range(K):
        best = tl.argmax(scores, axis=1, tie_break_left=True)
        value = tl.max(scores, axis=1)
        ids = tl.where(slot == j, best[:, None], ids)
        top = tl.where(slot == j, value[:, None], top)
        scores = tl.where(e == best[:, None], float("-inf"), scores)
    row_max = tl.max(x, axis=1)[:, None]  # the largest logit: the first one taken
    row_max = tl.where(row_max == float("-inf"), 0.0, row_max)  # padding rows stay finite
    chosen = tl.exp(top - row_max)  # 0 in the padding slots
    if SOFTMAX_ALL:
        total = tl.sum(tl.exp(x - row_max), axis=1)[:, None]
    else:
        total = tl.sum(chosen, axis=1)[:, None]
    weights = chosen / tl.where(t < T, total, 1.0)  # padding rows: 0, not 0 / 0
    if NORMALIZE:
        weights = weights / tl.maximum(tl.sum(weights, axis=1)[:, None], 6.103515625e-5)
    kept = (t < T) & (slot < K)
    tl.store(ids_ptr + t * K + slot, ids, mask=kept)
    tl.store(weights_ptr + t * K + slot, weights, mask=kept)
    tl.debug_barrier()  # the grouping below reads the ids back: the whole block's stores first
    if SORT:
        _group_by_sorting(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr,
                          T * K, n_expert, P_PAD, E_PAD)  # fmt: skip
    else:
        _group_by_comparison(ids_ptr, order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr,
                             T * K, P_PAD, 16)  # fmt: skip


@triton.jit
def _select_by_rank_and_group(x, scores_ptr, stride, bias_ptr, ids_ptr, weights_ptr, order_ptr,
                              expert_ptr, start_ptr, count_ptr, n_groups_ptr, T, n_expert,
                              K: tl.constexpr, T_PAD: tl.constexpr, E_PAD: tl.constexpr,
                              CHUNK: tl.constexpr, SOFTMAX_ALL: tl.constexpr,
                              NORMALIZE: tl.constexpr, HAS_BIAS: tl.constexpr):  # fmt: skip
    """One program, every step in parallel over the (token, expert) entries of x [T_PAD,
    E_PAD] (the scores, -inf past T tokens and n_expert experts; scores_ptr + t stride + e
    (+ bias_ptr + e) the same values in memory): each entry's rank among its token's scores
    (larger first, lower id first on a tie) counted against CHUNK scores at a time, so that
    the top-k are the ranks below k and an entry's rank is its slot; the weights from one
    max and one or two sums; the grouping from the count of tokens that took each expert and
    its prefix sums. No loop over k and no read-back of the ids: the same picks, slots and
    groups as select_and_group (a NaN score ranks as -inf)."""
    e = tl.arange(0, E_PAD)[None, :]
    x = tl.where(x == x, x, float("-inf"))
    t3 = tl.arange(0, T_PAD)[:, None, None]
    j3 = tl.arange(0, CHUNK)[None, :, None]
    x3 = x[:, None, :]
    e3 = e[:, None, :]
    rank = tl.zeros((T_PAD, E_PAD), tl.int32)
    for j0 in range(0, n_expert, CHUNK):  # the other scores down axis 1, held in each thread
        j = j0 + j3
        s = tl.load(scores_ptr + t3 * stride + j, mask=(t3 < T) & (j < n_expert),
                    other=float("-inf")).to(tl.float32)  # fmt: skip
        if HAS_BIAS:
            s += tl.load(bias_ptr + j, mask=j < n_expert, other=0.0)
        s = tl.where(s == s, s, float("-inf"))
        ahead = (s > x3) | ((s == x3) & (j < e3))  # past n_expert: -inf, behind any real one
        rank += tl.sum(ahead.to(tl.int32), axis=1)
    take_ranked(x, rank, ids_ptr, weights_ptr, order_ptr, expert_ptr, start_ptr, count_ptr,
                 n_groups_ptr, T, n_expert, K, T_PAD, E_PAD, SOFTMAX_ALL, NORMALIZE)  # fmt: skip


@triton.jit
def rank_in_registers(x, E_PAD: tl.constexpr):
    """Each entry's rank among its token's scores in x [T_PAD, E_PAD] (larger first, lower
    id first on a tie; -inf past n_expert and in place of a NaN), every pair of entries
    compared at once from registers: [T_PAD, E_PAD, E_PAD] comparisons, the others down axis
    1 (Triton moves x's two views through shared memory, no global round trip)."""
    j = tl.arange(0, E_PAD)[None, :, None]
    e = tl.arange(0, E_PAD)[None, None, :]
    s = x[:, :, None]
    me = x[:, None, :]
    ahead = (s > me) | ((s == me) & (j < e))
    return tl.sum(ahead.to(tl.int32), axis=1)


@triton.jit
def take_ranked(x, rank, ids_ptr, weights_ptr, order_ptr, expert_ptr, start_ptr, count_ptr,
                 n_groups_ptr, T, n_expert, K: tl.constexpr, T_PAD: tl.constexpr,
                 E_PAD: tl.constexpr, SOFTMAX_ALL: tl.constexpr,
                 NORMALIZE: tl.constexpr):  # fmt: skip
    """From the scores x [T_PAD, E_PAD] (-inf past T tokens and n_expert experts) and their
    ranks: the entries ranked below k taken, an entry's rank its slot; the weights from one
    max and one or two sums; the grouping from the count of tokens that took each expert and
    its prefix sums."""
    t = tl.arange(0, T_PAD)[:, None]
    e = tl.arange(0, E_PAD)[None, :]
    valid = (t < T) & (e < n_expert)
    taken = valid & (rank < K)
    row_max = tl.max(x, axis=1)[:, None]  # the largest score: the one ranked first
    row_max = tl.where(row_max == float("-inf"), 0.0, row_max)  # padding rows stay finite
    every = tl.exp(x - row_max)  # 0 past n_expert
    chosen = tl.where(taken, every, 0.0)
    total = tl.sum(every if SOFTMAX_ALL else chosen, axis=1)[:, None]
    weights = chosen / tl.where(t < T, total, 1.0)  # padding rows: 0, not 0 / 0
    if NORMALIZE:
        weights = weights / tl.maximum(tl.sum(weights, axis=1)[:, None], 6.103515625e-5)
    pair = t * K + rank
    tl.store(ids_ptr + pair, e + tl.zeros_like(rank), mask=taken)
    tl.store(weights_ptr + pair, weights, mask=taken)
    took = taken.to(tl.int32)
    count = tl.sum(took, axis=0)  # [E_PAD]: the tokens that took each expert
    present = (count > 0).to(tl.int32)
    packed = present * 65536 + count  # group and start in one prefix sum (P <= 256)
    before = tl.cumsum(packed, 0) - packed
    group = before >> 16
    start = before & 65535
    ee = tl.arange(0, E_PAD)
    leads = present > 0
    tl.store(expert_ptr + group, ee, mask=leads)
    tl.store(start_ptr + group, start, mask=leads)
    tl.store(count_ptr + group, count, mask=leads)
    tl.store(n_groups_ptr + ee, tl.zeros_like(ee) + tl.sum(present, axis=0), mask=ee < 1)
    earlier = tl.cumsum(took, 0) - took  # tokens before t that took the same expert
    tl.store(order_ptr + start[None, :] + earlier, pair, mask=taken)


@triton.jit
def _select_and_group_kernel(logits_ptr, bias_ptr, ids_ptr, weights_ptr, order_ptr, expert_ptr,
                             start_ptr, count_ptr, n_groups_ptr, T, n_expert, stride,
                             K: tl.constexpr, K_PAD: tl.constexpr, T_PAD: tl.constexpr,
                             E_PAD: tl.constexpr, P_PAD: tl.constexpr, SOFTMAX_ALL: tl.constexpr,
                             NORMALIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
                             SORT: tl.constexpr, RANK: tl.constexpr,
                             RANK_CHUNK: tl.constexpr):  # fmt: skip
    """One program: select_and_route from logits in memory (_select_by_rank_and_group where
    RANK, else select_and_group)."""
    t = tl.arange(0, T_PAD)[:, None]
    e = tl.arange(0, E_PAD)[None, :]
    valid = (t < T) & (e < n_expert)
    x = tl.load(logits_ptr + t * stride + e, mask=valid, other=float("-inf")).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias_ptr + e, mask=e < n_expert, other=0.0)
    if RANK:
        _select_by_rank_and_group(x, logits_ptr, stride, bias_ptr, ids_ptr, weights_ptr,
                                  order_ptr, expert_ptr, start_ptr, count_ptr, n_groups_ptr, T,
                                  n_expert, K, T_PAD, E_PAD, RANK_CHUNK, SOFTMAX_ALL, NORMALIZE,
                                  HAS_BIAS)  # fmt: skip
    else:
        select_and_group(x, ids_ptr, weights_ptr, order_ptr, expert_ptr, start_ptr, count_ptr,
                          n_groups_ptr, T, n_expert, K, K_PAD, T_PAD, E_PAD, P_PAD, SOFTMAX_ALL,
                          NORMALIZE, SORT)  # fmt: skip


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

    @classmethod
    def one_token(cls, ids: torch.Tensor, weights: torch.Tensor, n_expert: int) -> ExpertRouting:
        """A one-token step's picks ids [1, k] and weights [1, k], for the kernels that read
        only those (moe_gemv's ONE_TOKEN gate/up, moe_one_token.py's down): no grouping
        launch; the grouping's tables are ids itself, which those kernels never read."""
        return cls(ids, weights, n_expert, ids, ids, ids, ids, ids)

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


def route_experts(ids: torch.Tensor, weights: torch.Tensor | None, n_expert: int, *,
                  method: str | None = None) -> ExpertRouting:  # fmt: skip
    """ids [T, k] (any integer dtype, each in 0..n_expert-1: not checked on the device) and
    the routing weights [T, k] (needed only by the down projection's sum) -> ExpertRouting.
    Compute it once a layer and step: the gate/up and the down launches share it.
    method: "compare" or "sort" (module docstring); None: the faster for this many pairs."""
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
    order, expert, start, count, n_groups = _group_buffers(n_pairs, n_expert, ids.device)
    p_pad = max(16, triton.next_power_of_2(n_pairs))
    method = _method(n_pairs, method)
    if method == "compare":
        _group_pairs_by_comparison_kernel[(1,)](
            ids, order, expert, start, count, n_groups, n_pairs, P_PAD=p_pad, CHUNK=16,
            num_warps=4,
        )  # fmt: skip
    else:
        _group_pairs_by_sorting_kernel[(1,)](
            ids, order, expert, start, count, n_groups, n_pairs, n_expert, P_PAD=p_pad,
            E_PAD=max(16, triton.next_power_of_2(n_expert + 1)), num_warps=4,
        )  # fmt: skip
    return ExpertRouting(
        ids, None if weights is None else weights.contiguous(), n_expert, order, expert, start,
        count, n_groups,
    )  # fmt: skip


def _group_buffers(n_pairs: int, n_expert: int, device) -> tuple[torch.Tensor, ...]:
    """order, group_expert, group_start, group_count, n_groups: int32, one allocation."""
    groups = min(n_expert, n_pairs)
    buffers = torch.empty(n_pairs + 3 * groups + 1, dtype=torch.int32, device=device)
    return torch.split(buffers, [n_pairs, groups, groups, groups, 1])


def _method(n_pairs: int, method: str | None) -> str:
    if method is None:
        return "compare" if n_pairs <= COMPARE_UP_TO else "sort"
    if method not in ("compare", "sort"):
        raise UnsupportedTensor(f"routing method {method!r}: use 'compare' or 'sort'")
    return method


def check_logits_shape(n_tokens: int, n_expert: int, top_k: int, bias) -> None:
    if not 1 <= top_k <= n_expert:
        raise UnsupportedTensor(f"top-{top_k} of {n_expert} experts")
    if n_tokens * top_k > MAX_PAIRS:
        raise UnsupportedTensor(
            f"{n_tokens} tokens x top-{top_k} = {n_tokens * top_k} pairs: the expert GEMV takes "
            f"at most {MAX_PAIRS} a launch; split the tokens into smaller chunks"
        )
    if bias is not None and bias.numel() != n_expert:
        raise UnsupportedTensor(f"router bias of {bias.numel()} values for {n_expert} experts")


def _selection(n_tokens: int, n_expert: int, selection: str | None) -> str:
    """The selection method, "rank" or "argmax" (module docstring); None: rank up to
    RANK_UP_TO entries."""
    if selection is None:
        t_pad = triton.next_power_of_2(n_tokens)
        e_pad = max(16, triton.next_power_of_2(n_expert))
        return "rank" if t_pad * e_pad <= RANK_UP_TO else "argmax"
    if selection not in ("rank", "argmax"):
        raise UnsupportedTensor(f"expert selection {selection!r}: use 'rank' or 'argmax'")
    return selection


def select_sizes(n_tokens: int, n_expert: int, top_k: int, method: str | None,
                  selection: str | None = None) -> dict:  # fmt: skip
    """The selection's constexprs (_select_by_rank_and_group or select_and_group); the
    argmax's grouping by sorting needs a histogram bin past the experts."""
    n_pairs = n_tokens * top_k
    rank = _selection(n_tokens, n_expert, selection) == "rank"
    return dict(
        K=top_k, K_PAD=triton.next_power_of_2(top_k), T_PAD=triton.next_power_of_2(n_tokens),
        E_PAD=max(16, triton.next_power_of_2(n_expert + (0 if rank else 1))),
        P_PAD=max(16, triton.next_power_of_2(n_pairs)), SORT=_method(n_pairs, method) == "sort",
        RANK=rank, RANK_CHUNK=16,
    )  # fmt: skip


def select_and_route(logits: torch.Tensor, top_k: int, *, softmax_all: bool, normalize: bool,
                     bias: torch.Tensor | None = None, method: str | None = None,
                     selection: str | None = None) -> ExpertRouting:  # fmt: skip
    """Router logits [T, n_expert] (+ bias [n_expert]) -> the ExpertRouting of each token's
    top_k experts, with its ids (int32) and weights (float32), in one launch: what
    engine/hearth/routing.select_experts followed by route_experts compute.
    softmax_all: weights from the softmax over all experts (qwen2moe, qwen3moe, Mixtral), else
    the softmax over the k taken (gpt-oss); normalize: the k weights divided by their sum
    (at least 2^-14, as llama.cpp clamps it). selection: "rank" or "argmax" (module
    docstring; the same picks); None: by size. method: the argmax's grouping."""
    require()
    if logits.dim() != 2 or logits.shape[0] < 1:
        raise UnsupportedTensor(f"router logits of shape {tuple(logits.shape)}: pass [T, n_expert]")
    n_tokens, n_expert = logits.shape
    check_logits_shape(n_tokens, n_expert, top_k, bias)
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    ids, weights, groups = routing_buffers(n_tokens, n_expert, top_k, logits.device)
    _select_and_group_kernel[(1,)](
        logits, bias if bias is not None else weights, ids, weights, *groups, n_tokens,
        n_expert, logits.stride(0), SOFTMAX_ALL=softmax_all, NORMALIZE=normalize,
        HAS_BIAS=bias is not None, num_warps=4,
        **select_sizes(n_tokens, n_expert, top_k, method, selection),
    )  # fmt: skip
    return ExpertRouting(ids, weights, n_expert, *groups)


def routing_buffers(n_tokens: int, n_expert: int, top_k: int, device):
    """ids [T, k] int32, weights [T, k] float32, and _group_buffers'."""
    ids = torch.empty(n_tokens, top_k, dtype=torch.int32, device=device)
    weights = torch.empty(n_tokens, top_k, dtype=torch.float32, device=device)
    return ids, weights, _group_buffers(n_tokens * top_k, n_expert, device)
