"""Launching the decode attention (decode_attention.py): its launch shape (AttentionTuning), how
many programs an SM holds (so that the caller sizes its splits to one wave), and the two
launches, the reduce overlapping the split kernel on Hopper.

Programmatic dependent launch: the split kernel signals at its start that the next launch may
begin (griddepcontrol.launch_dependents), and the reduce, launched with the launch_pdl
attribute, waits in-kernel until the split kernel's grid has finished and its stores are
visible (griddepcontrol.wait). The reduce's launch then overlaps the split kernel's work
instead of following its end; in a CUDA graph the edge is kept as a programmatic one.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import triton

from kernels.decode_attention import (
    decode_reduce_kernel,
    decode_split_kernel,
    prepare_queries_kernel,
)
from kernels.occupancy import compiled_programs_per_sm, sm_limits
from kernels.tickets import TicketCounters

# Warps a program where 4 is not the fastest, from the H100 sweep at 32k (docs/kernels.md,
# session 7): rot4/rot4 34.6 us with 2 warps against 37.3 with 4 (5 programs an SM instead of
# 4, and 1,928 warp-instructions a page against 2,316). kivi4/rot4 was faster still with 2
# (44.3 against 54.3 us; 4 programs an SM instead of 3), and its swept-launch GPU test (every
# swept shape, 2 warps among them, the same attention) passed on the H100 in session 8; q8 K
# and f16 were as fast or faster with 4.
FASTEST_WARPS = {("rot4", "rot4"): 2, ("kivi4", "rot4"): 2}
# K/V pairs that mask positions only on the pages that need it (AttentionTuning.mask_tail
# None): where the H100 measured a gain beyond the spread at 4k, 32k and 128k (session 9)
MASK_TAIL_PAIRS = {("rot4", "rot4")}
INTERPRETER_PROGRAMS_PER_SM = 4  # no compiled kernel to size from in Triton's interpreter
# splits the reduce reads in one step: all of them up to this many, so that its loads of m, l
# and the partial rows go out at once (a [128, D] f32 tile is 64 registers a thread at 8 warps)
REDUCE_MAX_CHUNK = 128
# query rows a program of prepare_queries_kernel rotates: a decode step's 32 rows (Llama-3-8B)
# in 8 programs side by side rather than one program's chain of butterfly stages
PREPARE_ROWS = 4
# the fused reduce's tile of partials [splits, rows, D] f32 at most this many registers a
# thread, so that merging needs no more registers than the page loop (which sets occupancy):
# sm_90 SASS with Triton 3.6 (the device's) and 3.8, every pair's registers and programs an
# SM unchanged at 64 (at 128 q8/rot4 and q8/q8 lose a program an SM). 64 is 8 splits a step
# at 2 warps (Llama-3-8B's 4 rows of 128), 16 at 4; also the size of a group of splits
MERGE_TILE_REGISTERS = 64
# Triton's pipelining of the fused reduce's steps: 1, none. Pipelined, its loads become
# cp.async copies of 4 bytes through L1 (.ca, whatever the load's cache modifier), and L1 is not
# coherent within a launch: a program could read a partial as an earlier program on its SM
# had seen it before it was written. Unpipelined they are ld.global.cg (16 bytes, past L1).
# Two levels keep the steps in a program few (a group: 1; the groups: n_groups / CHUNK)
MERGE_STAGES = 1
# ticket counters for the fused reduce (per sequence and KV head: one per group of splits and
# one for the head; kernels/tickets.py), a buffer of their own beside the GEMV's
_REDUCE_TICKETS = TicketCounters(minimum=4096)
# K formats stored rotated: q is rotated to match them (AttentionTuning.rotate_q_once)
ROTATED_K = ("rot4", "rot2")


@dataclass
class AttentionTuning:
    """Launch shape of the decode attention: programs per SM (sets the split count from the
    capacity; 0: as many as the compiled kernel's registers and shared memory let one SM hold,
    so that one wave fills the GPU, kernels/occupancy.py), warps and pipeline stages per
    program. benchmarks/kernels/attention.py sweeps these (--attention-sweep); the defaults are
    the best of that sweep on an H100 (docs/kernels.md).

    num_stages: Triton's software pipelining of the page loop. The loads of a page depend on a
    load (its number, from the block table), so Triton keeps one stage for that; with 3 or 4
    stages the loop waited for the page it had just asked for at the top of every step (the
    SASS's wait count is 0: no load overlapped any compute), with 5 one page is in flight while
    another is computed, with 7 two (python -m benchmarks.kernels.attention_sass shows it).
    Measured at 32k (H100): 5 stages took q8/q8 from 40.2 to 36.5 us and kivi4/rot4 from 62.2
    to 54.3; rot4/rot4 did not gain (36.6 with 3, 37.3 with 5): its loads were not its bound."""

    programs_per_sm: int = 0
    num_warps: int = 0  # 0: by the K/V formats (FASTEST_WARPS, else 4)
    num_stages: int = 5
    # rot4 and q8 codes to f16: "words" (four bytes per inline-assembly step,
    # kernels/nibbles.py) or "bytes" (the path before, byte by byte); docs/kernels.md has
    # both SASS counts
    code_unpack: str = "words"
    # Hopper: launch the reduce while the split kernel runs (programmatic dependent launch; it
    # waits for the split kernel's grid in-kernel), hiding its launch gap; ignored elsewhere.
    # 0.2-1.1 us a layer on four pairs at 32k, -1.0 on q8/q8: about twice the run's spread
    overlap_reduce: bool = True
    # rot4 and rot2 K: q rotated, scaled and cast (rot4: its even and odd dims apart) once a
    # step by a small launch before the split kernel (overlapped with that kernel's start on
    # Hopper), instead of by each of the split kernel's programs. sm_90 SASS at 2 warps: rot4's
    # code before its page loop 1,043 -> 376 instructions, 32 -> 5 barriers; its page step
    # 964 -> 1,000 (both q halves now read from shared memory each step). Off until a GPU has
    # timed it (docs/kernels.md): the launch and the longer step may cost more than it saves.
    rotate_q_once: bool = False
    # every K/V pair: the softmax's row sums kept per position and summed once after the page
    # loop, not reduced across the warps at every page step. sm_90 SASS, rot4/rot4 page step:
    # 7 -> 5 barriers, 12 -> 6 shuffles at 2 warps (but 168 -> 210 registers: 4 programs an SM
    # where 5 fit), 16 -> 8 at 4 warps (128 registers either way). Off until a GPU has timed it.
    sum_after_loop: bool = False
    # registers a thread the split kernel may use (Triton's maxnreg; 0: the compiler's choice).
    # 2-warp programs fit 5 an SM at 168 or fewer (3 warps on a sub-partition's 16,384
    # registers; kernels/occupancy.py), not at 200 as session 8 counted. H100, session 10, with
    # the count right: rot4/rot4 capped at 168 (5 programs) 30.8 against 27.0 us at 32k and
    # 82.6 against 77.1 at 128k (10.9 against 13.5 at 4k); 4 warps capped at 128 (4 programs of
    # 4 warps) 31.4 and 95.3. Unset.
    max_registers: int = 0
    # the reduce in the split kernel's launch: the last program of each group of splits to
    # finish merges the group, the last group of a (sequence, KV head) the groups (atomic
    # tickets; decode_attention._fused_reduce), one launch a step instead of two. Off: the
    # separate reduce kernel (overlapped on Hopper by overlap_reduce).
    fused_reduce: bool = False
    # rot4 V: its f16 tile built 2-D, not reshaped from [P, D/32, 16] (kv_tiles.load_rot4_halves'
    # FLAT). sm_90 SASS with Triton 3.6 (the device's), rot4/rot4 at 2 warps: 16 STS.128 a
    # page step instead of 128 STS.U16, the step 1,122 -> 935 instructions (206 -> 224
    # registers, 4 programs an SM either way); q8/rot4 at 4 warps 742 -> 644. H100, session 9:
    # rot4/rot4 at 32k 34.8 -> 29.9 us, 128k 104.9 -> 86.1; q8/rot4 35.5 -> 31.0, 112.1 -> 94.8
    # (beyond the spread at 4k, 32k and 128k: docs/kernels.md)
    flat_v: bool = True
    # the position mask only on pages some query row does not see whole (without a window,
    # decode: the last page; decode_attention's MASK_TAIL); None: by K/V pair (MASK_TAIL_PAIRS).
    # H100, session 9: rot4/rot4 29.4 -> 27.6 us at 32k, 86.2 -> 80.6 at 128k, 14.1 -> 13.7
    # at 4k; f16/f16 lost 6.3 us at 32k and q8/rot4 1.6 at 4k (docs/kernels.md)
    mask_tail: bool | None = None
    # Hopper: each step's split kernel launched as the previous launch's dependent, waiting in
    # -kernel for it before any read (its WAIT_PRIOR), and the reduce letting the next launch
    # start at once (LAUNCH_NEXT); the KV write before it does the same (kv_write's
    # LAUNCH_DEPENDENTS), so the split kernel's launch and its programs' placement overlap the
    # kernel before instead of following its end. H100, session 10 (with reduce_warps 4, each
    # timed between two timings of the default): rot4/rot4 32k 27.0-27.5 -> 25.6 us, 4k 13.6 ->
    # 10.6, 128k 75.5 -> 74.0; q8/rot4 32k 31.2 -> 29.5; f16 32k within the spread (53.6 against
    # 53.6-53.7), 4k 14.7 -> 12.1
    chain_launches: bool = True
    # kivi4 K: its page's channel scales and mins loaded as whole rows and broadcast over their
    # positions, so the dequantized key tile stays 2-D (kv_kivi.kivi_page_scores' FLAT), as
    # flat_v does for rot4 V. sm_90 SASS, Triton 3.6, kivi4/rot4 at 2 warps: the page step
    # 1,242 -> 1,214 instructions, 17 -> 9 barriers, its 8 two-byte scale loads become
    # cp.async copies (238 registers, 4 programs an SM either way). H100, session 10, between
    # two timings of the default: 32k 38.1 -> 30.2 us, 128k 116.5 -> 90.5, 4k 11.8 -> 11.9
    # (within the spread: one page a split there)
    flat_kivi_k: bool = True
    # warps a reduce program (0: 8 when it merges 64 splits or more a step, else 4). 4 won at
    # every depth timed against 8 (H100, session 10, two calls): rot4/rot4 4k 13.3 -> 10.8 us,
    # 32k 27.2 -> 26.4-26.5, 128k 75.7 -> 75.4; f16 32k 53.7-54.1 -> 52.7-53.2, 4k 14.7 -> 13.1
    reduce_warps: int = 4

    def masks_tail(self, k_format: str, v_format: str) -> bool:
        """Whether the split kernel masks positions only where needed (mask_tail)."""
        if self.mask_tail is not None:
            return self.mask_tail
        return (k_format, v_format) in MASK_TAIL_PAIRS

    def chains(self, device: torch.device) -> bool:
        """Whether the split kernel is launched as the previous launch's dependent here
        (chain_launches: Hopper, with the overlapped reduce, not the fused one); the KV write
        before it then lets it start early."""
        return (
            self.chain_launches
            and self.overlap_reduce
            and not self.fused_reduce
            and has_dependent_launch(device)
        )

    def prepares_queries(self, k_format: str) -> bool:
        """Whether the split kernel reads q from prepare_queries_kernel (its Q_READY)."""
        return self.rotate_q_once and k_format in ROTATED_K

    def register_cap(self) -> dict:
        """The split kernel's compile option for max_registers (none when 0)."""
        if not self.max_registers:
            return {}
        from triton.backends.nvidia.compiler import CUDAOptions

        if "maxnreg" not in CUDAOptions.__dataclass_fields__:
            raise ValueError(
                f"max_registers={self.max_registers} needs a Triton whose compiler takes "
                "maxnreg; set max_registers=0 (the compiler's choice)"
            )
        return {"maxnreg": self.max_registers}

    def warps(self, k_format: str, v_format: str) -> int:
        """Warps a program for this K/V pair: num_warps, or when 0 the measured fastest."""
        return self.num_warps or FASTEST_WARPS.get((k_format, v_format), 4)

    def __post_init__(self) -> None:
        if self.code_unpack not in ("words", "bytes"):
            raise ValueError(
                f"code_unpack is 'words' or 'bytes', not {self.code_unpack!r}: "
                "'bytes' is the older unpacking of rot4 and q8 codes, kept to compare and to "
                "fall back to"
            )


def runs_assembly(device: torch.device) -> bool:
    """Inline PTX runs on a CUDA GPU, not in Triton's CPU interpreter."""
    return device.type == "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1"


@functools.cache
def has_dependent_launch(device: torch.device) -> bool:
    """Programmatic dependent launch (griddepcontrol): Hopper and newer, compiled kernels, a
    Triton whose launcher sets the attribute (its `launch_pdl` option)."""
    if not runs_assembly(device):
        return False
    from triton.backends.nvidia.compiler import CUDAOptions

    if "launch_pdl" not in CUDAOptions.__dataclass_fields__:
        return False
    return torch.cuda.get_device_capability(device) >= (9, 0)


_FITS: dict[tuple, int] = {}  # programs per SM, per launch shape and device


def fitting_programs(q: torch.Tensor, consts: dict, arguments: tuple) -> int:
    """Programs of the split kernel that one SM holds at once (kernels/occupancy.py), for
    these compile-time arguments: compiled (not launched) once per launch shape. The
    interpreter has no compiled kernel: a fixed count there."""
    if not runs_assembly(q.device):
        return INTERPRETER_PROGRAMS_PER_SM
    key = (str(q.device), *sorted(consts.items()))
    if key not in _FITS:
        if consts.get("Q_READY"):  # the kernel then reads q as f16 (prepare_queries)
            q = q.to(torch.float16)
        outputs = [torch.empty(1, dtype=torch.float32, device=q.device) for _ in range(3)]
        outputs += [q, torch.zeros(1, dtype=torch.int32, device=q.device)]  # out, counters
        kernel = decode_split_kernel.warmup(q, *outputs, *arguments, grid=(1,), **consts)
        _FITS[key] = compiled_programs_per_sm(kernel, sm_limits(q.device))
    return _FITS[key]


def prepare_queries(q: torch.Tensor, signs: torch.Tensor, qk_scale: float, halves: bool,
                    launch_dependents: bool) -> torch.Tensor:  # fmt: skip
    """q [..., D] as prepare_queries_kernel leaves it for the split kernel (rotated, scaled,
    f16, rot4 K: halves): a new tensor of q's shape."""
    d = q.shape[-1]
    rows = q.numel() // d
    out = torch.empty(q.shape, dtype=torch.float16, device=q.device)
    prepare_queries_kernel[(triton.cdiv(rows, PREPARE_ROWS),)](
        q, out, signs, qk_scale, rows, ROWS=PREPARE_ROWS, D=d, LOG2D=int(d).bit_length() - 1,
        HALVES=halves, LAUNCH_DEPENDENTS=launch_dependents, num_warps=1,
    )  # fmt: skip
    return out


def split_counters(device: torch.device, n: int) -> torch.Tensor:
    """n zeroed int32 ticket counters on device for the fused reduce (shared by every cache on
    that device: launches on one stream never overlap in their use of them)."""
    return _REDUCE_TICKETS.get(device, n)


def fused_reduce_consts(tuning: AttentionTuning, rows: int, d: int, num_warps: int) -> dict:
    """The split kernel's compile-time arguments for the fused reduce (none when off):
    MERGE_ROWS, the query rows of a KV head (a power of two), and MERGE_CHUNK, the splits
    merged a step (a power of two, MERGE_TILE_REGISTERS f32 a thread at most)."""
    if not tuning.fused_reduce:
        return {}
    merge_rows = triton.next_power_of_2(rows)
    budget = MERGE_TILE_REGISTERS * 32 * num_warps // (merge_rows * d)
    chunk = max(1, triton.next_power_of_2(budget + 1) // 2)  # the largest power of 2 <= it
    return {
        "FUSED_REDUCE": True, "MERGE_ROWS": merge_rows, "MERGE_CHUNK": chunk,
        "MERGE_STAGES": MERGE_STAGES,
    }  # fmt: skip


def launch_decode(q: torch.Tensor, arguments: tuple, consts: dict, n_splits: int, spec,
                  signs: torch.Tensor, tuning: AttentionTuning, qk_scale: float,
                  q_prepared: bool = False) -> torch.Tensor:  # fmt: skip
    """Both phases over q [n_seqs, T, n_heads, D] with n_splits splits a KV head; arguments:
    the split kernel's after q and its outputs (kv_cache.PagedKVCache.attend). With
    consts["Q_READY"] (AttentionTuning.prepares_queries), q prepared first by its own launch,
    unless q_prepared (q as the RoPE kernel left it with a QueryPreparation: f16). Returns
    q's shape; q's dtype, or f16 where q came prepared."""
    n_seqs, n_tokens, n_heads, d = q.shape
    parts = n_seqs * n_tokens * n_heads * n_splits
    fused = consts.get("FUSED_REDUCE", False)
    counters = None
    if fused:  # room for the group partials (decode_attention._fused_reduce), and counters
        groups = triton.cdiv(n_splits, consts["MERGE_CHUNK"])
        parts = n_seqs * n_tokens * n_heads * (n_splits + groups)
        counters = split_counters(q.device, n_seqs * spec.n_kv_heads * (groups + 1))
    acc = torch.empty(parts, d, dtype=torch.float32, device=q.device)
    m = torch.empty(parts, dtype=torch.float32, device=q.device)
    l_sum = torch.empty(parts, dtype=torch.float32, device=q.device)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    counters = m if counters is None else counters
    overlap = tuning.overlap_reduce and has_dependent_launch(q.device)
    q_split, after_prepare = q, {}
    if consts.get("Q_READY") and not q_prepared:
        # the split kernel as the preparation's dependent where the reduce is one too: both
        # edges are programmatic, or neither (overlap_reduce off keeps every launch serial)
        q_split = prepare_queries(q, signs, qk_scale, spec.k_format == "rot4", overlap)
        after_prepare = {"launch_pdl": True, "WAIT_Q": True} if overlap else {}
    chain = tuning.chains(q.device)
    if chain and not after_prepare:
        after_prepare = {"launch_pdl": True, "WAIT_PRIOR": True}
    decode_split_kernel[(n_seqs, spec.n_kv_heads, n_splits)](
        q_split, acc, m, l_sum, out, counters, *arguments, LAUNCH_DEPENDENTS=overlap,
        **after_prepare, **consts,
    )  # fmt: skip
    if fused:
        return out
    chunk = min(REDUCE_MAX_CHUNK, triton.next_power_of_2(n_splits))
    dependent = {"launch_pdl": True} if overlap else {}
    decode_reduce_kernel[(n_seqs * n_tokens, n_heads)](
        acc, m, l_sum, out, signs, n_splits, HQ=n_heads, D=d, LOG2D=int(d).bit_length() - 1,
        CHUNK=chunk, V_ROTATED=spec.v_format == "rot4", WAIT_PRIMARY=overlap,
        LAUNCH_NEXT=chain, num_warps=tuning.reduce_warps or (8 if chunk >= 64 else 4),
        **dependent,
    )  # fmt: skip
    return out
