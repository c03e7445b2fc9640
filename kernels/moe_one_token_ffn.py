"""A one-token step's routed experts in one launch: gate/up, the activation and the down, the
down's weights read while the gate/up's last tiles still run.

    h[s]  = act(Wg[e_s] x, Wu[e_s] x)                              e_s = ids[0, s]
    out   = sum_s weights[0, s] Wd[e_s] h[s]

Two launches (moe_gemv.py's gate/up, then moe_one_token.py's down) leave the GPU half idle at
their edge: the down's programs hold a whole SM's registers each, so they start only as the
gate/up's last programs leave, and each then waits for its 80 KB of weights before any
arithmetic (Qwen3-30B-A3B: the down's 10 MB took 9 us after the gate/up ended, 2.4 us at the
copy rate). Here one grid of resident programs takes tiles from a counter:

    tiles 0 .. nA - 1          gate/up: BLOCK_A rows of one slot's expert (gate and up), the
                               activation, h's rows stored in x's dtype; then `done` += 1
    tiles nA .. nA + nB - 1    down: BLOCK_B output rows of every slot's expert; the weights
                               are loaded first, then the program waits until `done` counts
                               every gate/up tile, then rounds h to 8 bits and sums the slots

A program takes its next tile's number while it works on this one. Tiles are handed out in
order, so a program reaches a down tile only once every gate/up tile has been taken, by a
program that is running and will finish it without waiting: the wait always ends, however many
programs the GPU holds at once (and in Triton's interpreter, which runs one program after
another: the first takes every tile). The counters are never reset: each launch takes exactly
nA + nB + P numbers from `work` (each program one past the last tile) and adds nA to `done`, so
a launch knows its own from the first number it takes (launch i = number // (nA + nB + P)),
and a CUDA graph replays it as it is.

The arithmetic is moe_gemv.py's gate/up and moe_one_token.py's down, the same explicit fmas
and sums in the same order: the same bits as those two launches (tests/kernels/
test_moe_one_token_ffn.py).

Dependent launch (sm_90+): a program takes its first number, then waits for the kernel before
(griddepcontrol.wait) before it reads anything that kernel wrote; the next kernel may start
once the program has no tile left.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.act_quant import QuantizedActivation
from kernels.launch import gdc_launch_dependents, gdc_wait
from kernels.moe_blocks import (
    Q8_0,
    glu,
    group_terms,
    load_pairs,
    plane_args,
    run_sums,
    runs_in_8_bits,
)
from kernels.tickets import TicketCounters
from kernels.tree_sums import tree_sum


@triton.jit
def _gate_up_tile(
    t, x_ptr, xd_ptr, xs_ptr, h_ptr, g0, g1, g2, g3, g4, u0, u1, u2, u3, u4, ids_ptr,
    N_FF, K, NB, alpha, limit,
    FMT: tl.constexpr, ACT: tl.constexpr, BLOCK: tl.constexpr, NG: tl.constexpr,
    ASM: tl.constexpr,
):  # fmt: skip
    """Gate/up tile t: rows (t % tiles a slot) BLOCK.. of slot t // (tiles a slot)'s expert,
    h's rows stored (moe_gemv._expert_kernel's GATE_UP at one token)."""
    per_slot = tl.cdiv(N_FF, BLOCK)
    slot = t // per_slot
    rows = (t % per_slot) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < N_FF
    expert = tl.load(ids_ptr + slot).to(tl.int64)
    wrow = expert * N_FF + rows
    ge = tl.arange(0, NG)
    group_mask = ge < K // 32
    ga_lo, ga_hi, sa_lo, ca_lo, sa_hi, ca_hi, r_lo, r_hi = load_pairs(
        g0, g1, g2, g3, g4, wrow, row_mask, ge, group_mask, NB, FMT, ASM
    )
    ub_lo, ub_hi, sb_lo, cb_lo, sb_hi, cb_hi, _, _ = load_pairs(
        u0, u1, u2, u3, u4, wrow, row_mask, ge, group_mask, NB, FMT, ASM
    )
    zero_rows = (rows * 0)[:, None]  # x loaded in the weights' [BLOCK, NG] layout
    mask2 = group_mask[None, :] & (zero_rows == 0)
    mask3 = mask2[:, :, None]
    words = x_ptr + zero_rows[:, :, None] + tl.arange(0, 4)[None, None, :]
    x_lo = tl.load(words + r_lo[None, :, None] * 4, mask=mask3, other=0)
    x_hi = tl.load(words + r_hi[None, :, None] * 4, mask=mask3, other=0)
    dx_lo = tl.load(xd_ptr + zero_rows + r_lo[None, :] // 2, mask=mask2, other=0.0)
    dx_hi = tl.load(xd_ptr + zero_rows + r_hi[None, :] // 2, mask=mask2, other=0.0)
    xs_lo = tl.load(xs_ptr + zero_rows + r_lo[None, :], mask=mask2, other=0)
    xs_hi = tl.load(xs_ptr + zero_rows + r_hi[None, :], mask=mask2, other=0)
    ya = group_terms(
        dx_lo, run_sums(ga_lo, sa_lo, ca_lo, x_lo, xs_lo, ASM),
        dx_hi, run_sums(ga_hi, sa_hi, ca_hi, x_hi, xs_hi, ASM),
    )  # fmt: skip
    yb = group_terms(
        dx_lo, run_sums(ub_lo, sb_lo, cb_lo, x_lo, xs_lo, ASM),
        dx_hi, run_sums(ub_hi, sb_hi, cb_hi, x_hi, xs_hi, ASM),
    )  # fmt: skip
    h = glu(tl.sum(ya, axis=1), tl.sum(yb, axis=1), alpha, limit, ACT)
    tl.store(h_ptr + slot * N_FF + rows, h.to(h_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def _wait_for(done_ptr, target):
    """Until `done` reaches target; then h's stores are visible to this program (acquire)."""
    seen = tl.load(done_ptr, volatile=True)
    while seen < target:
        seen = tl.load(done_ptr, volatile=True)
    tl.atomic_add(done_ptr, 0, sem="acquire", scope="gpu")


@triton.jit
def _down_tile(
    t, h_ptr, part_ptr, ticket_ptr, out_ptr, d0, d1, d2, d3, d4, ids_ptr, weights_ptr,
    done_ptr, target, N, K, NB, TOP_K,
    FMT: tl.constexpr, BLOCK: tl.constexpr, NG: tl.constexpr, S: tl.constexpr,
    ASM: tl.constexpr, WAIT: tl.constexpr,
):  # fmt: skip
    """Down tile t: output rows (t // k) BLOCK.. of slot t % k's expert, its weights loaded
    before the wait for h; the row tile's last slot to finish sums the slots (moe_one_token's
    down: the same fmas in the same order). N: output rows, K: h's width."""
    tile = t // TOP_K
    slot = t % TOP_K
    rows = tile * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < N
    expert = tl.load(ids_ptr + slot).to(tl.int64)
    ge = tl.arange(0, NG)
    group_mask = ge < K // 32
    u_lo, u_hi, s_lo, c_lo, s_hi, c_hi, r_lo, r_hi = load_pairs(
        d0, d1, d2, d3, d4, expert * N + rows, row_mask, ge, group_mask, NB, FMT, ASM
    )
    if WAIT:
        _wait_for(done_ptr, target)
    words, d, sums = runs_in_8_bits(
        h_ptr + slot * K, r_lo, r_hi, group_mask, NG, FMT >= Q8_0, ".cg"
    )
    x_lo, x_hi = tl.split(tl.permute(words, (0, 2, 1)))  # [NG, 4] each
    x_lo = tl.broadcast_to(x_lo[None, :, :], (BLOCK, NG, 4))
    x_hi = tl.broadcast_to(x_hi[None, :, :], (BLOCK, NG, 4))
    dx_lo, dx_hi = tl.split(d)
    xs_lo, xs_hi = tl.split(sums)
    y = group_terms(
        tl.broadcast_to(dx_lo[None, :], (BLOCK, NG)),
        run_sums(u_lo, s_lo, c_lo, x_lo, tl.broadcast_to(xs_lo[None, :], (BLOCK, NG)), ASM),
        tl.broadcast_to(dx_hi[None, :], (BLOCK, NG)),
        run_sums(u_hi, s_hi, c_hi, x_hi, tl.broadcast_to(xs_hi[None, :], (BLOCK, NG)), ASM),
    )  # fmt: skip
    tl.store(part_ptr + slot * N + rows, tree_sum(y, BLOCK, NG), mask=row_mask)
    tl.debug_barrier()  # every thread's rows stored before the ticket
    if tl.atomic_add(ticket_ptr + tile, 1, sem="acq_rel", scope="gpu") == TOP_K - 1:
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in tl.static_range(S):  # slot by slot, one fma each, as moe_one_token's down
            there = row_mask & (s < TOP_K)
            y_s = tl.load(part_ptr + s * N + rows, mask=there, other=0.0, cache_modifier=".cg")
            w_s = tl.load(weights_ptr + s, mask=s < TOP_K, other=0.0).to(tl.float32)
            total = tl.fma(y_s, w_s, total)
        tl.store(out_ptr + rows, total.to(out_ptr.dtype.element_ty), mask=row_mask)
        tl.atomic_xchg(ticket_ptr + tile, 0)  # zero for the next launch


@triton.jit
def _one_token_ffn_kernel(
    x_ptr, xd_ptr, xs_ptr, h_ptr, part_ptr, ticket_ptr, out_ptr,
    g0, g1, g2, g3, g4, u0, u1, u2, u3, u4, d0, d1, d2, d3, d4,
    ids_ptr, weights_ptr, counter_ptr,
    N_FF, K, NB_GU, NB_DOWN, TOP_K, alpha, limit,
    FMT_GU: tl.constexpr, FMT_DOWN: tl.constexpr, ACT: tl.constexpr,
    BLOCK_A: tl.constexpr, NG_A: tl.constexpr, BLOCK_B: tl.constexpr, NG_B: tl.constexpr,
    S: tl.constexpr, ASM: tl.constexpr, GDC: tl.constexpr = False,
    COUNT_EACH: tl.constexpr = False, PROBE: tl.constexpr = 0,
):  # fmt: skip
    """See the module docstring. x: its 8-bit words, scales and sums ([1, K]); h: [k, N_FF]
    in x's dtype and part [k, K] float32, written and read here; ticket: a zeroed int32 a
    down row tile; out [1, K]; counter: int64 [2] (work, done)."""
    n_a = TOP_K * tl.cdiv(N_FF, BLOCK_A)
    n_tiles = n_a + tl.cdiv(K, BLOCK_B) * TOP_K
    numbers = n_tiles + tl.num_programs(0)  # taken from `work` a launch
    first = tl.atomic_add(counter_ptr, 1, sem="relaxed", scope="gpu")
    launch = first // numbers
    base = launch * numbers
    target = (launch + 1) * n_a  # `done` once this launch's gate/up tiles are all stored
    if GDC:  # a dependent launch: ids, x and every write only after the kernel before ends
        gdc_wait()
    t = first - base
    stored = first * 0  # gate/up tiles done here and not yet counted in `done`
    while t < n_tiles:
        following = tl.atomic_add(counter_ptr, 1, sem="relaxed", scope="gpu") - base
        if t < n_a:
            _gate_up_tile(t, x_ptr, xd_ptr, xs_ptr, h_ptr, g0, g1, g2, g3, g4,
                          u0, u1, u2, u3, u4, ids_ptr, N_FF, K, NB_GU, alpha, limit,
                          FMT_GU, ACT, BLOCK_A, NG_A, ASM)  # fmt: skip
            if COUNT_EACH:
                tl.debug_barrier()  # every thread's rows of h stored before the count
                tl.atomic_add(counter_ptr + 1, 1, sem="release", scope="gpu")
            else:
                stored += 1
        elif PROBE != 1:
            if stored > 0:  # counted before this program waits for the others' h
                tl.debug_barrier()
                tl.atomic_add(counter_ptr + 1, stored, sem="release", scope="gpu")
                stored = first * 0
            _down_tile(t - n_a, h_ptr, part_ptr, ticket_ptr, out_ptr, d0, d1, d2, d3, d4,
                       ids_ptr, weights_ptr, counter_ptr + 1, target, K, N_FF, NB_DOWN, TOP_K,
                       FMT_DOWN, BLOCK_B, NG_B, S, ASM, PROBE != 2)  # fmt: skip
        t = following
    if stored > 0:
        tl.debug_barrier()
        tl.atomic_add(counter_ptr + 1, stored, sem="release", scope="gpu")
    if GDC:
        gdc_launch_dependents()


@dataclass(frozen=True)
class FfnShape:
    """The launch's tiles: gate/up rows a tile (4: moe_gemv's one-token gate/up), output rows
    of every slot a down tile, warps a program."""

    block_a: int = 4
    block_b: int = 16
    num_warps: int = 4
    count_each: bool = False
    probe: int = 0


INTERPRETER_PROGRAMS = 4  # Triton's interpreter: no registers to size the grid from
_COUNTERS: dict[tuple, torch.Tensor] = {}  # (device, numbers a launch) -> int64 [work, done]
_PROGRAMS: dict[tuple, int] = {}  # resident programs of a compiled shape, per device
# a ticket a down row tile, shared by the launches of a stream (each leaves them at zero)
_TICKETS = TicketCounters(minimum=1024)


def _counter(device: torch.device, numbers: int) -> torch.Tensor:
    """The counters of launches that take `numbers` numbers each (zeroed once, never reset)."""
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = (device, numbers)
    if key not in _COUNTERS:
        _COUNTERS[key] = torch.zeros(2, dtype=torch.int64, device=device)
    return _COUNTERS[key]


def _resident_programs(kernel_args: tuple, consts: dict, device: torch.device) -> int:
    """Programs the whole GPU holds at once for this compiled shape (kernels/occupancy.py)."""
    from kernels.launch import runs_assembly
    from kernels.occupancy import compiled_programs_per_sm, sm_limits

    if not runs_assembly(device):
        return INTERPRETER_PROGRAMS
    key = (str(device), *sorted(consts.items()))
    if key not in _PROGRAMS:
        compiled = _one_token_ffn_kernel.warmup(*kernel_args, grid=(1,), **consts)
        per_sm = compiled_programs_per_sm(compiled, sm_limits(device))
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        _PROGRAMS[key] = max(1, per_sm) * sms
    return _PROGRAMS[key]


def launch_ffn(xq: QuantizedActivation, dtype: torch.dtype, gate, up, down, routing,
               fmt_codes: tuple[int, int], act: int, alpha: float, limit: float, asm: bool,
               gdc: bool, shape: FfnShape) -> torch.Tensor:  # fmt: skip
    """One launch of a one-token step's routed experts (moe_gemv.expert_ffn chooses, and checks
    the shapes): x's 8-bit form [1, n_embd] -> [1, n_embd] in `dtype`; gate, up, down their
    ExpertWeights, routing the step's ExpertRouting."""
    n_ff, n_embd = gate.n_out, gate.n_in
    device = xq.words.device
    top_k = routing.top_k
    h = torch.empty(top_k, n_ff, dtype=dtype, device=device)
    part = torch.empty(top_k, n_embd, dtype=torch.float32, device=device)
    out = torch.empty(1, n_embd, dtype=dtype, device=device)
    row_tiles = triton.cdiv(n_embd, shape.block_b)
    n_tiles = top_k * (triton.cdiv(n_ff, shape.block_a) + row_tiles)
    consts = dict(
        FMT_GU=fmt_codes[0], FMT_DOWN=fmt_codes[1], ACT=act, BLOCK_A=shape.block_a,
        NG_A=triton.next_power_of_2(n_embd // 32), BLOCK_B=shape.block_b,
        NG_B=triton.next_power_of_2(n_ff // 32), S=triton.next_power_of_2(top_k), ASM=asm,
        GDC=gdc, num_warps=shape.num_warps, COUNT_EACH=shape.count_each, PROBE=shape.probe,
    )  # fmt: skip
    head = (
        xq.words, xq.scales, xq.sums, h, part, _TICKETS.get(device, row_tiles), out,
        *plane_args(gate.packed), *plane_args(up.packed), *plane_args(down.packed),
        routing.ids, routing.weights,
    )  # fmt: skip
    tail = (
        n_ff, n_embd, n_embd // gate.packed.fmt.block_size, n_ff // down.packed.fmt.block_size,
        top_k, float(alpha), float(limit),
    )  # fmt: skip
    sizing = torch.empty(2, dtype=torch.int64, device=device)  # (compiled, not launched)
    programs = min(n_tiles, _resident_programs((*head, sizing, *tail), consts, device))
    counter = _counter(device, n_tiles + programs)
    extra = {"launch_pdl": True} if gdc else {}
    _one_token_ffn_kernel[(programs,)](*head, counter, *tail, **consts, **extra)
    return out
