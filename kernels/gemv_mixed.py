"""One integer GEMV launch over two matrices of different block types that read the same x.

    y = x @ [A; B].T,  A Q4_K [n_a, K], B Q6_K [n_b, K]  ->  y [1, n_a + n_b]

Why: a Q4_K_M Llama-3-8B layer has Q and K in Q4_K and, in half the layers, V in Q6_K. The
engine joins Q and K (one 5120x4096 GEMV) but V stays a launch of its own, a 1024x4096 GEMV
that costs about 2 µs whatever the kernel (a programmatic dependent launch cannot end sooner
than one L2 round trip for x after the kernel before, plus a program's compute: docs/
kernels.md, session 8) against 0.8 µs of copy time. Here the programs of both matrices are one
grid: programs 0 .. tiles_a - 1 take A's tiles with A's kernel code (gemv_dp4a's Q4_K path,
rows in the thread), the rest B's (its Q6_K path), by a branch on the program id; one x in 8
bits, one output. Each program is one step of whole rows (rows of up to NBLK super-blocks, one
input row), as the defaults of both formats at 4096 inputs; the launch is programmatic
dependent (sm_90) with the early next launch, as theirs. Anything else: `supports` says no and
the caller runs the two matrices apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.act_quant import QuantizedActivation, has_griddepcontrol, quantize_activation
from kernels.availability import interpret_mode
from kernels.errors import UnsupportedTensor
from kernels.gemv_common import gdc_launch_dependents, gdc_wait
from kernels.gemv_dp4a import _load, _mac, plane_args
from kernels.packed_weight import PackedWeight

BLOCK_A = 4  # Q4_K rows a program (its default's tile)
NBLK = 16  # super-blocks a step: a 4096-wide row in one step


@dataclass(frozen=True)
class MixedWeight:
    """A Q4_K matrix and a Q6_K matrix of the same row length, multiplied as one: y's first
    a.n_out columns are x @ a.T, the next b.n_out x @ b.T."""

    a: PackedWeight  # Q4_K
    b: PackedWeight  # Q6_K

    @property
    def n_out(self) -> int:
        return self.a.n_out + self.b.n_out

    @property
    def n_in(self) -> int:
        return self.a.n_in

    @property
    def nbytes(self) -> int:
        return self.a.nbytes + self.b.nbytes


def supports(a: PackedWeight, b: PackedWeight, n_rows_x: int = 1) -> bool:
    """Whether one mixed launch can serve a (Q4_K) and b (Q6_K) at n_rows_x input rows."""
    return (
        a.fmt.name == "Q4_K"
        and b.fmt.name == "Q6_K"
        and a.n_in == b.n_in
        and a.n_in // 256 <= NBLK
        and n_rows_x == 1
    )


@triton.jit
def _one_tile(tile, out_ptr, xq_ptr, xd_ptr, xs_ptr, p0, p1, p2, p3, N, NB,
              BLOCK_N: tl.constexpr, NBLK: tl.constexpr, EVEN: tl.constexpr, Q6: tl.constexpr,
              RIT: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """One program's tile: weight rows tile * BLOCK_N .. + BLOCK_N - 1, every super-block of
    the row in one step (gemv_dp4a's ONE_STEP path with one split and one input row)."""
    PER: tl.constexpr = 2 if Q6 else 4  # groups per super-block
    rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = (rows < N) | EVEN
    blk = tl.arange(0, NBLK * PER) // PER
    group_mask = (blk < NB) | EVEN
    w0, w1, w2, w3, w4, w5 = _load(p0, p1, p2, p3, rows, row_mask, blk, group_mask, NB, Q6,
                                   RIT)  # fmt: skip
    if GDC:  # the early next launch, then wait for x (module docstring)
        gdc_launch_dependents()
        gdc_wait()
    acc = tl.zeros((BLOCK_N, NBLK * PER), dtype=tl.float32)
    acc = _mac(acc, (w0, w1, w2, w3, w4, w5), blk, group_mask, rows, xq_ptr, xq_ptr, xd_ptr,
               xs_ptr, True, ASM, Q6, RIT)  # fmt: skip
    y = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def mixed_gemv_kernel(
    xq_ptr, xd_ptr, xs_ptr, out_ptr, a0, a1, a2, a3, b0, b1, b2, b3, N_A, N_B, NB, tiles_a,
    BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr, NBLK: tl.constexpr, EVEN_A: tl.constexpr,
    EVEN_B: tl.constexpr, RIT_B: tl.constexpr, GDC: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """a0..a3: the Q4_K planes d, dmin, scales, qs; b0..b3: the Q6_K planes ql, qh, scales, d
    (gemv_dp4a.plane_args). Programs below tiles_a: A's rows, written at out[0 .. N_A); the
    rest: B's, written at out[N_A ..)."""
    pid = tl.program_id(0)
    if pid < tiles_a:
        _one_tile(pid, out_ptr, xq_ptr, xd_ptr, xs_ptr, a0, a1, a2, a3, N_A, NB, BLOCK_A, NBLK,
                  EVEN_A, False, True, GDC, ASM)  # fmt: skip
    else:
        _one_tile(pid - tiles_a, out_ptr + N_A, xq_ptr, xd_ptr, xs_ptr, b0, b1, b2, b3, N_B, NB,
                  BLOCK_B, NBLK, EVEN_B, True, RIT_B, GDC, ASM)  # fmt: skip


def mixed_matmul(
    x: torch.Tensor,
    w: MixedWeight,
    *,
    quantized: QuantizedActivation | None = None,
    pipelined: bool = True,
    num_warps: int = 2,
    b_rows: int = 2,
    b_rows_in_thread: bool = False,
) -> torch.Tensor:
    """x [1, K] (or [K]) f16/bf16/f32 -> [1, n_a + n_b] in x's dtype, one launch (plus x's
    quantization unless `quantized` is given). pipelined=False: a plain launch (the engine's
    HEARTH_GEMV_PIPELINED=0). b_rows, b_rows_in_thread: B's (Q6_K's) tile, rows a program and
    gemv_dp4a's RIT. Both parts are one kernel, so they get the registers of the larger: Q6_K
    at its own default's tile (4 rows, 104 registers a thread, sm_90) would cost the Q4_K part
    (80) a quarter of its programs resident; at 2 rows the kernel takes 72. The default, 2
    rows without RIT, is session 9's measured best (docs/kernels.md: 7.0-7.2 µs for Q+K 5120
    and V 1024 rows at 4096 inputs on an H100, against 7.9 µs as two launches; 2 rows with
    RIT and 4 rows with RIT were no faster than two launches)."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    if not supports(w.a, w.b, x2.shape[0]) or x.shape[-1] != w.n_in:
        raise UnsupportedTensor(
            f"a mixed GEMV needs Q4_K then Q6_K rows of up to {NBLK * 256} equal inputs and one "
            f"input row, not {w.a.fmt.name} and {w.b.fmt.name} of {w.a.n_in} and {w.b.n_in} "
            f"inputs at {tuple(x.shape)}"
        )
    if quantized is not None and quantized.shape != tuple(x2.shape):
        raise UnsupportedTensor(
            f"quantized activation of shape {quantized.shape} is not of this input "
            f"{tuple(x2.shape)}: quantize the same x that is passed"
        )
    gdc = pipelined and has_griddepcontrol(x.device)
    xq = quantized or quantize_activation(x2, let_next_start=gdc)
    out = torch.empty(1, w.n_out, dtype=x.dtype, device=x.device)
    nb = w.n_in // 256
    tiles_a = triton.cdiv(w.a.n_out, BLOCK_A)
    grid = tiles_a + triton.cdiv(w.b.n_out, b_rows)
    extra = {"launch_pdl": True} if gdc else {}
    mixed_gemv_kernel[(grid,)](
        xq.words, xq.scales, xq.sums, out, *plane_args(w.a), *plane_args(w.b),
        w.a.n_out, w.b.n_out, nb, tiles_a, BLOCK_A=BLOCK_A, BLOCK_B=b_rows, NBLK=NBLK,
        EVEN_A=w.a.n_out % BLOCK_A == 0 and nb == NBLK,
        EVEN_B=w.b.n_out % b_rows == 0 and nb == NBLK, RIT_B=b_rows_in_thread, GDC=gdc,
        ASM=not interpret_mode(),
        num_warps=num_warps, num_stages=3, **extra,
    )  # fmt: skip
    return out.reshape(*lead, w.n_out)
