"""Launching the decode attention (decode_attention.py): its launch shape (AttentionTuning), how
many programs an SM holds (so that the caller sizes its splits to one wave), the queries and
the attention sinks as the kernels read them, and the two launches, the reduce overlapping the
split kernel on Hopper.

On Hopper the split kernel signals at its start that the next launch may begin, and the
reduce, launched as its dependent, waits in-kernel until the split kernel's grid has finished
(kernels/launch.py): the reduce's launch overlaps the split kernel's work instead of following
its end.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import triton

from kernels.act_quant import QuantizedActivation
from kernels.decode_attention import LOG2E, decode_reduce_kernel, decode_split_kernel
from kernels.launch import has_dependent_launch, runs_assembly
from kernels.occupancy import compiled_programs_per_sm, sm_limits

# Warps a program where 4 is not the fastest (H100 sweep at 32k, docs/decisions/
# 0012-attention-warps-and-stages.md); every other K/V pair takes 4
FASTEST_WARPS = {("rot4", "rot4"): 2, ("kivi4", "rot4"): 2}
# K/V pairs that mask positions only on the pages that need it (AttentionTuning.mask_tail
# None): where the H100 measured a gain beyond the spread
# (docs/decisions/0013-attention-mask-tail.md)
MASK_TAIL_PAIRS = {("rot4", "rot4")}
INTERPRETER_PROGRAMS_PER_SM = 4  # no compiled kernel to size from in Triton's interpreter
# splits the reduce reads in one step: all of them up to this many, so that its loads of m, l
# and the partial rows go out at once (a [256, 32] f32 tile is 64 registers a thread at 4 warps)
REDUCE_MAX_CHUNK = 256
# a head's D values a reduce program merges (whole groups of 32 for the 8-bit output)
REDUCE_D_CHUNK = 32
# values of a reduce program's [splits, D chunk] tile a thread holds (AttentionTuning.reduce_warps
# 0): at 32k on an H200, 2 warps for Llama-3-8B's 128 x 32 tile made the step 1.4-1.9% faster
# than 4, and 4 warps for Qwen3-30B-A3B's 256 x 32 were as fast as 2
# (docs/decisions/2026-12-01-attention-reduce-by-d-chunks.md)
REDUCE_VALUES_A_THREAD = 64


@dataclass
class AttentionTuning:
    """Launch shape of the decode attention: programs per SM (sets the split count from the
    capacity; 0: as many as the compiled kernel's registers and shared memory let one SM hold,
    so that one wave fills the GPU, kernels/occupancy.py), warps and pipeline stages per
    program. benchmarks/kernels/attention.py sweeps these (--attention-sweep); the defaults are
    the best of that sweep on an H100 (docs/decisions/0012-attention-warps-and-stages.md).

    num_stages: Triton's software pipelining of the page loop. The loads of a page depend on a
    load (its number, from the block table), so Triton keeps one stage for that; with 5 one
    page is in flight while another is computed (fewer left the loop waiting at the top of
    every step for the page it had just asked for)."""

    programs_per_sm: int = 0
    num_warps: int = 0  # 0: by the K/V formats (FASTEST_WARPS, else 4)
    num_stages: int = 5
    # Hopper: launch the reduce while the split kernel runs (programmatic dependent launch; it
    # waits for the split kernel's grid in-kernel), hiding its launch gap; ignored elsewhere
    overlap_reduce: bool = True
    # the position mask only on pages some query row does not see whole (without a window,
    # decode: the last page; decode_attention's MASK_TAIL); None: by K/V pair (MASK_TAIL_PAIRS)
    mask_tail: bool | None = None
    # Hopper: each step's split kernel launched as the previous launch's dependent, waiting
    # in-kernel for it before any read (its WAIT_PRIOR), and the reduce letting the next launch
    # start at once (LAUNCH_NEXT); the KV write before it does the same (kv_write's
    # LAUNCH_DEPENDENTS), so the split kernel's launch and its programs' placement overlap the
    # kernel before instead of following its end (docs/decisions/0014-attention-chained-launch.md)
    chain_launches: bool = True
    reduce_warps: int = 0  # warps a reduce program (0: by its tile, reduce_warps_for)

    def masks_tail(self, k_format: str, v_format: str) -> bool:
        """Whether the split kernel masks positions only where needed (mask_tail)."""
        if self.mask_tail is not None:
            return self.mask_tail
        return (k_format, v_format) in MASK_TAIL_PAIRS

    def chains(self, device: torch.device) -> bool:
        """Whether the split kernel is launched as the previous launch's dependent here
        (chain_launches: Hopper, with the overlapped reduce); the KV write before it then lets
        it start early."""
        return self.chain_launches and self.overlap_reduce and has_dependent_launch(device)

    def warps(self, k_format: str, v_format: str) -> int:
        """Warps a program for this K/V pair: num_warps, or when 0 the measured fastest."""
        return self.num_warps or FASTEST_WARPS.get((k_format, v_format), 4)


def reduce_warps_for(chunk: int, d_chunk: int) -> int:
    """Warps of a reduce program whose tile is [chunk splits, d_chunk values]: as many as hold
    REDUCE_VALUES_A_THREAD values a thread, 2 to 8."""
    return min(8, max(2, chunk * d_chunk // (32 * REDUCE_VALUES_A_THREAD)))


_FITS: dict[tuple, int] = {}  # programs per SM, per launch shape and device


def fitting_programs(q: torch.Tensor, consts: dict, arguments: tuple) -> int:
    """Programs of the split kernel that one SM holds at once (kernels/occupancy.py), for
    these compile-time arguments: compiled (not launched) once per launch shape. The
    interpreter has no compiled kernel: a fixed count there."""
    if not runs_assembly(q.device):
        return INTERPRETER_PROGRAMS_PER_SM
    key = (str(q.device), *sorted(consts.items()))
    if key not in _FITS:
        outputs = [torch.empty(1, dtype=torch.float32, device=q.device) for _ in range(3)]
        kernel = decode_split_kernel.warmup(q, *outputs, *arguments, grid=(1,), **consts)
        _FITS[key] = compiled_programs_per_sm(kernel, sm_limits(q.device))
    return _FITS[key]


def query_rows(q4: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(q [n_seqs, T, n_heads, D] with each query token's heads side by side, the stride
    between query tokens): q4 itself where it is so (a speculative check's rows, views into
    the RoPE launch's output), else a contiguous copy."""
    n_seqs, n_tokens, n_heads, d = q4.shape
    tokens_evenly = n_tokens == 1 or n_seqs == 1 or q4.stride(0) == n_tokens * q4.stride(1)
    if q4.stride(3) == 1 and (n_heads == 1 or q4.stride(2) == d) and tokens_evenly:
        return q4, q4.stride(1) if n_tokens > 1 else q4.stride(0)
    q = q4.contiguous()
    return q, n_heads * d


# a layer's sinks times log2(e), made once a sinks tensor (a model's weights): a decode step's
# launch a layer fewer, and nothing made while a CUDA graph is captured. Keyed by the tensor's
# id, with a weak reference that tells a reused id from the tensor it was made for.
_SINKS_LOG2: dict[int, tuple[weakref.ref, torch.Tensor]] = {}


def sinks_in_log2(sinks: torch.Tensor, device: torch.device) -> torch.Tensor:
    """sinks [n_heads] * log2(e) in float32 on `device` (the reduce works in base 2)."""
    kept = _SINKS_LOG2.get(id(sinks))
    if kept is not None and kept[0]() is sinks and kept[1].device == device:
        return kept[1]
    scaled = (sinks.reshape(-1).to(device=device, dtype=torch.float32) * LOG2E).contiguous()
    if id(sinks) not in _SINKS_LOG2:  # dropped with the tensor (a model unloaded)
        weakref.finalize(sinks, _SINKS_LOG2.pop, id(sinks), None)
    _SINKS_LOG2[id(sinks)] = (weakref.ref(sinks), scaled)
    return scaled


def launch_decode(q: torch.Tensor, arguments: tuple, consts: dict, n_splits: int, spec,
                  signs: torch.Tensor, tuning: AttentionTuning,
                  sinks: torch.Tensor | None = None,
                  quantized: QuantizedActivation | None = None) -> torch.Tensor:  # fmt: skip
    """Both phases over q [n_seqs, T, n_heads, D] with n_splits splits a KV head; arguments:
    the split kernel's after q and its outputs (kv_cache.PagedKVCache.attend); sinks: float32
    [n_heads] logits times log2(e), or None; quantized: buffers of [n_seqs * T, n_heads * D]
    that the reduce also fills with the output in 8 bits (the integer GEMV's input), or None.
    Returns q's shape and dtype."""
    n_seqs, n_tokens, n_heads, d = q.shape
    parts = n_seqs * n_tokens * n_heads * n_splits
    acc = torch.empty(parts, d, dtype=torch.float32, device=q.device)
    m = torch.empty(parts, dtype=torch.float32, device=q.device)
    l_sum = torch.empty(parts, dtype=torch.float32, device=q.device)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    overlap = tuning.overlap_reduce and has_dependent_launch(q.device)
    chain = tuning.chains(q.device)
    after_prior = {"launch_pdl": True, "WAIT_PRIOR": True} if chain else {}
    decode_split_kernel[(n_seqs, spec.n_kv_heads, n_splits)](
        q, acc, m, l_sum, *arguments, LAUNCH_DEPENDENTS=overlap, **after_prior, **consts,
    )  # fmt: skip
    chunk = min(REDUCE_MAX_CHUNK, triton.next_power_of_2(n_splits))
    d_chunk = min(REDUCE_D_CHUNK, d)
    dependent = {"launch_pdl": True} if overlap else {}
    decode_reduce_kernel[(n_seqs * n_tokens, n_heads, d // d_chunk)](
        acc, m, l_sum, out, signs if sinks is None else sinks,
        *(m, m, m) if quantized is None else (quantized.words, quantized.scales, quantized.sums),
        n_splits, HQ=n_heads, D=d, DC=d_chunk, CHUNK=chunk, HAS_SINKS=sinks is not None,
        WAIT_PRIMARY=overlap, QUANTIZE=quantized is not None, LAUNCH_NEXT=chain,
        num_warps=tuning.reduce_warps or reduce_warps_for(chunk, d_chunk), **dependent,
    )  # fmt: skip
    return out
