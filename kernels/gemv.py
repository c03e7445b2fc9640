"""y = x @ w.T for a PackedWeight, dequantizing GGUF blocks on the fly.

Two paths: Q4_K and Q6_K at one input row take the integer one (gemv_dp4a.py: x in 8 bits per
32 values, quantized by a small launch of its own unless the caller passes it, dp4a against the
packed codes, split-K reduced in the same launch; 2..4 rows all in one program,
gemv_dp4a_rows.py, where the config says rows_in_program and the shape is one it takes,
else and at 5..DP4A_MAX_ROWS a program a row);
Q8_0 at one input row takes its own integer GEMV (gemv_q8_0.py); every other case dequantizes
to floats
(gemv_kquants.py, gemv_blocks.py; one launch, plus one small sum when split-K is used).
`GemvConfig(path="float")` forces the float path (float inputs unrounded) where a caller needs
it."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton

from kernels import gemv_blocks, gemv_dp4a, gemv_dp4a_rows, gemv_kquants, gemv_q8_0
from kernels.act_quant import QuantizedActivation
from kernels.availability import interpret_mode, require
from kernels.errors import UnsupportedTensor
from kernels.gemv_common import INTEGER_STEP_BLOCKS, split_plan, whole_steps
from kernels.packed_weight import PackedWeight
from kernels.tickets import TicketCounters

# Per format: the launcher and how many weights one of its kernel's "blocks" covers.
_LAUNCH = {
    "Q4_K": (gemv_kquants.launch_q4_k_q5_k, 256),
    "Q5_K": (gemv_kquants.launch_q4_k_q5_k, 256),
    "Q6_K": (gemv_kquants.launch_q6_k, 256),
    "Q4_0": (gemv_blocks.launch_block32, 32),
    "Q4_1": (gemv_blocks.launch_block32, 32),
    "Q5_0": (gemv_blocks.launch_block32, 32),
    "Q5_1": (gemv_blocks.launch_block32, 32),
    "Q8_0": (gemv_blocks.launch_block32, 32),
    "F16": (gemv_blocks.launch_float, 64),
    "BF16": (gemv_blocks.launch_float, 64),
    "F32": (gemv_blocks.launch_float, 64),
}
_X_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# The integer path: its launchers, and the most input rows that take it by default (0: none,
# every call takes the float path; a test comparing a whole forward pass with a float reference
# can set it so: 8-bit activations move a tiny random model's logits by a few percent). Up to 8
# rows it beats the float path and the dequantized matrix's GEMM on every Llama-3-8B matrix
# (an H200: docs/decisions/0022-batch-rows-by-dequantized-gemm.md).
_DP4A = ("Q4_K", "Q6_K")
DP4A_MAX_ROWS = 8
# Q8_0 through its integer GEMV (gemv_q8_0.py) at one input row, where an H200 measured it
# 1.7-2.1x the float tiles on gpt-oss-20b's three Q8_0 shapes and the decode step 1.79 ms
# against 2.14 (docs/decisions/2026-11-29-q8_0-integer-gemv.md); at 2..DP4A_MAX_ROWS rows,
# not measured (a program per row reads the matrix once per row), the float path as before
Q8_0_INTEGER_MAX_ROWS = 1


@dataclass(frozen=True)
class GemvConfig:
    block_n: int  # weight rows per program
    blocks_per_tile: int  # format blocks per K step
    block_b: int  # input rows per program: 1 (FMA path) or 16 (tl.dot path)
    num_warps: int = 4
    num_stages: int = 2
    path: str = "float"  # "float" (dequantize to floats) or "dp4a" (8-bit x, integer dots)
    # dp4a on sm_90+: a chained launch (programmatic dependent launch): the GEMV may start
    # while the kernel before it runs, loads its first weights, then waits for x
    # (gemv_dp4a's GDC); engine/hearth/ops.py turns it off with HEARTH_GEMV_CHAINED=0.
    chained: bool = False
    # dp4a, chained: let the next kernel start as soon as every program has started, not
    # once each has computed (EARLY_NEXT)
    early_next: bool = False
    # dp4a: K split so that every program computes one step of `whole_steps` super-blocks
    # (more programs, each with all its loads in flight at once; split-K sums in the launch)
    one_step: bool = False
    # dp4a, x in 8 bits: weights and x loaded so that a thread holds several rows of one
    # group and x's words once for them (gemv_common.load_words), not once per row
    rows_in_thread: bool = False
    # dp4a: the config for rows longer than one step of this one (ffn_down's 14336 inputs),
    # so that one config (what default_config gives a caller) can serve every shape; it keeps
    # this one's `chained` and `early_next`; None: this config for every row length
    long_rows: GemvConfig | None = None
    # dp4a: the config for matrices of at least `tall_from` output rows whose rows are one step
    # of this one (gate/up, 14336 and 28672 rows), likewise keeping this one's `chained` and
    # `early_next`; None: this config whatever the row count
    tall_rows: GemvConfig | None = None
    tall_from: int = 0
    # every input row cut into the splits of K, and its splits summed, as a one-row call of
    # this config does it: row t of a many-row call then equals the one-row call on x[t] bit
    # for bit (speculative checking, engine/hearth/verify.py). Needs block_b == 1 (each row
    # its own program); without it the split plan counts every row's tiles.
    rows_alike: bool = False
    # dp4a at 2..gemv_dp4a_rows.MAX_ROWS (4) rows (and not rows_alike) of the matrices
    # gemv_dp4a_rows.takes_shape names: every input row in one program (a weight tile loaded
    # and unpacked once for all the rows), not a program per row; its tile is
    # gemv_dp4a_rows.default_rows_config's. False: a
    # program per row at every row count (what benchmarks/kernels/gemv_rows.py compares)
    rows_in_program: bool = False


# output rows from which default_config's Q4_K takes 8 rows a program (tall_rows): above the
# joined Q+K+V (6144, equal either way) and below gate/up (14336, where 8 rows won)
TALL_ROWS = 8192


def default_config(fmt: str, n_rows_x: int) -> GemvConfig:
    """The integer path (integer_config) for Q4_K and Q6_K at up to DP4A_MAX_ROWS rows and
    Q8_0's (Q8_0_INTEGER) at up to Q8_0_INTEGER_MAX_ROWS, else the float path (float_config).
    Tile shapes from the H100 runs (docs/decisions/0003-gemv-tile-shapes.md)."""
    if fmt in _DP4A and n_rows_x <= DP4A_MAX_ROWS:
        return integer_config(fmt)
    if fmt == "Q8_0" and n_rows_x <= Q8_0_INTEGER_MAX_ROWS:
        return Q8_0_INTEGER
    return float_config(fmt, n_rows_x)


# the Q8_0 integer GEMV's tile (gemv_q8_0.py): 2 weight rows, K steps of 64 blocks, 2 warps,
# the fastest of six on all three of gpt-oss-20b's Q8_0 shapes (the decision record's table)
Q8_0_INTEGER = GemvConfig(block_n=2, blocks_per_tile=64, block_b=1, num_warps=2, path="dp4a",
                          chained=True)  # fmt: skip


def integer_config(fmt: str) -> GemvConfig:
    """The integer path's tiles for Q4_K or Q6_K, the same at every row count (a program per
    weight tile and input row): 4 weight rows x 16 super-blocks a step (a 4096-wide row in one
    step: every load of a program in flight at once), x quantized in a launch of its own unless
    given, and on sm_90+ a chained launch that lets the next kernel start as soon as every
    program has started. Q4_K: 2 warps, weights and x loaded with several rows in a thread
    (`rows_in_thread`); Q6_K: 2 warps, K split into one step a program. Rows longer than one
    step (ffn_down's 14336) take a K loop, each step's weights loaded after the step before
    (`long_rows`): Q4_K in steps of 8 super-blocks, Q6_K of 16."""
    if fmt not in _DP4A:
        raise UnsupportedTensor(f"the dp4a GEMV path has no {fmt} kernel; use path='float'")
    step = GemvConfig(4, INTEGER_STEP_BLOCKS, 1, num_stages=3, path="dp4a", chained=True,
                      early_next=True, num_warps=2, one_step=True,
                      rows_in_program=True)  # fmt: skip
    loop = GemvConfig(4, 8, 1, num_stages=3, path="dp4a", chained=True, early_next=True)
    if fmt == "Q6_K":
        return dataclasses.replace(step, long_rows=dataclasses.replace(loop, blocks_per_tile=16))
    # Q4_K matrices of many waves: 8 rows a program (x's words once for 8 rows) beat 4 on
    # gate/up's 14336 and 28672 rows and lost on the one-wave ones, where a program's work
    # after the wait is the chain and 8 rows double it (docs/decisions/0003-gemv-tile-shapes.md)
    tall = dataclasses.replace(step, rows_in_thread=True, block_n=8)
    return dataclasses.replace(
        step, rows_in_thread=True, long_rows=loop, tall_rows=tall, tall_from=TALL_ROWS
    )


def float_config(fmt: str, n_rows_x: int) -> GemvConfig:
    """default_config's float path (x as it is, weights dequantized to floats): one input row a
    program at one row, 16 through tl.dot past that."""
    blocks = {256: 4, 32: 16, 64: 8}[_LAUNCH[fmt][1]]
    if n_rows_x == 1:
        return GemvConfig(block_n=8, blocks_per_tile=blocks, block_b=1)
    return GemvConfig(block_n=64, blocks_per_tile=max(1, blocks // 4), block_b=16)


@dataclass(frozen=True)
class _Plan:
    blocks_per_split: int
    splits: int
    stride_split: int
    even_rows: bool  # n_out is whole tiles of rows
    even: bool  # ... and K is whole tiles in every split: no bounds masks at all
    exact_fma: bool  # fma rounds once (the GPU); Triton's CPU interpreter rounds twice

    @property
    def native(self) -> bool:
        """On the GPU (inline assembly runs), not in Triton's CPU interpreter."""
        return self.exact_fma


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the CPU interpreter: small, so the tests' small shapes still take split-K


def quant_matmul(
    x: torch.Tensor,
    w: PackedWeight,
    config: GemvConfig | None = None,
    *,
    quantized: QuantizedActivation | None = None,
) -> torch.Tensor:
    """x: [..., n_in] f16/bf16/f32 -> [..., n_out] in x's dtype.

    quantized: x's 8-bit form from kernels.quantize_activation(x), shared by the calls that
    read the same x; the integer path then skips its own quantization launch (the float path,
    which every other case takes, ignores it)."""
    require()
    fmt = w.fmt.name
    if x.shape[-1] != w.n_in:
        raise UnsupportedTensor(
            f"input of shape {tuple(x.shape)} does not match the {fmt} weight's {w.n_in} inputs"
        )
    if x.dtype not in _X_DTYPES:
        raise UnsupportedTensor(f"input dtype {x.dtype}: use float16, bfloat16 or float32")
    lead = x.shape[:-1]
    x2 = x.reshape(-1, w.n_in).contiguous()
    n_rows_x = x2.shape[0]
    if n_rows_x == 0:
        return x.new_empty(*lead, w.n_out)
    launch, unit = _LAUNCH[fmt]
    cfg = config or default_config(fmt, n_rows_x)
    if cfg.rows_alike and cfg.block_b != 1:
        raise UnsupportedTensor("rows_alike needs block_b == 1: each input row its own program")
    if cfg.path == "dp4a":
        if fmt not in (*_DP4A, "Q8_0"):
            raise UnsupportedTensor(f"the dp4a GEMV path has no {fmt} kernel; use path='float'")
        if quantized is not None and quantized.shape != tuple(x2.shape):
            raise UnsupportedTensor(
                f"quantized activation of shape {quantized.shape} is not of this input "
                f"{tuple(x2.shape)}: quantize the same x that is passed"
            )
        if fmt == "Q8_0":
            out = gemv_q8_0.matmul(x2, w, cfg, quantized, not interpret_mode())
        else:
            out = _dp4a_matmul(x2, w, cfg, quantized)
        return out.reshape(*lead, w.n_out)
    n_row_tiles = triton.cdiv(w.n_out, cfg.block_n)
    b_tiles = triton.cdiv(n_rows_x, cfg.block_b)
    n_blocks = triton.cdiv(w.n_in, unit)
    planned_b_tiles = 1 if cfg.rows_alike else b_tiles
    per_split, splits = split_plan(
        n_blocks, cfg.blocks_per_tile, n_row_tiles * planned_b_tiles, _sm_count(x.device)
    )
    if splits == 1:
        out = torch.empty(n_rows_x, w.n_out, dtype=x.dtype, device=x.device)
    else:
        out = torch.empty(splits, n_rows_x, w.n_out, dtype=torch.float32, device=x.device)
    even_rows = w.n_out % cfg.block_n == 0
    even = even_rows and per_split * splits == n_blocks and per_split % cfg.blocks_per_tile == 0
    exact_fma = not interpret_mode()
    plan = _Plan(per_split, splits, out.stride(0) if splits > 1 else 0, even_rows, even, exact_fma)
    launch(w, x2, out, (n_row_tiles, splits, b_tiles), plan, cfg)
    if splits > 1 and cfg.rows_alike and n_rows_x > 1:
        # each row's partials summed as a one-row call sums them: the same shape and strides
        rows = [out[:, b : b + 1].contiguous().sum(0) for b in range(n_rows_x)]
        out = torch.cat(rows).to(x.dtype)
    elif splits > 1:
        out = out.sum(0).to(x.dtype)
    return out.reshape(*lead, w.n_out)


# one ticket per output tile, for split-K reduced in the same launch (kernels/tickets.py)
_COUNTERS = TicketCounters(minimum=1 << 16)


def dp4a_plan(cfg: GemvConfig, n_out: int, n_in: int, n_rows_x: int, n_sm: int, native: bool):
    """(the config that serves this shape, its _Plan): how _dp4a_matmul cuts the work."""
    n_blocks = n_in // 256
    planned_rows = 1 if cfg.rows_alike else n_rows_x  # the split plan of one row (GemvConfig)
    if cfg.long_rows is not None and n_blocks > cfg.blocks_per_tile:
        # the launch flags stay the caller's (the engine turns PDL off with its own switch)
        cfg = dataclasses.replace(cfg.long_rows, chained=cfg.chained, early_next=cfg.early_next)
    elif cfg.tall_rows is not None and n_out >= cfg.tall_from:
        cfg = dataclasses.replace(cfg.tall_rows, chained=cfg.chained, early_next=cfg.early_next)
    n_row_tiles = triton.cdiv(n_out, cfg.block_n)
    if cfg.one_step:
        cfg = dataclasses.replace(cfg, blocks_per_tile=whole_steps(n_blocks, cfg.blocks_per_tile))
        per_split = cfg.blocks_per_tile
        splits = triton.cdiv(n_blocks, per_split)
    else:
        per_split, splits = split_plan(
            n_blocks, cfg.blocks_per_tile, n_row_tiles * planned_rows, n_sm
        )
    even_rows = n_out % cfg.block_n == 0
    even = even_rows and per_split * splits == n_blocks and per_split % cfg.blocks_per_tile == 0
    return cfg, _Plan(per_split, splits, 0, even_rows, even, native)


def _dp4a_matmul(
    x2: torch.Tensor, w: PackedWeight, cfg: GemvConfig, quantized: QuantizedActivation | None
) -> torch.Tensor:
    n_rows_x = x2.shape[0]
    if (
        cfg.rows_in_program
        and not cfg.rows_alike
        and 2 <= n_rows_x <= gemv_dp4a_rows.MAX_ROWS
        and gemv_dp4a_rows.takes_shape(w.fmt.name, w.n_out, w.n_in)
    ):
        rows_cfg = gemv_dp4a_rows.default_rows_config(w.fmt.name, n_rows_x, w.n_out, w.n_in)
        return _dp4a_rows_matmul(x2, w, dataclasses.replace(rows_cfg, chained=cfg.chained),
                                 quantized)  # fmt: skip
    cfg, plan, out, part, counters = dp4a_buffers(x2, w, cfg)
    gemv_dp4a.launch(w, x2, quantized, out, part, counters, plan, cfg)
    return out


def dp4a_buffers(x2: torch.Tensor, w: PackedWeight, cfg: GemvConfig):
    """(config, _Plan, out, split-K partials, tickets) of the integer GEMV's one launch (a
    program a row) for x2 [B, n_in]: _dp4a_matmul's, and kernels/router_beside_wo.py's."""
    n_rows_x = x2.shape[0]
    cfg, plan = dp4a_plan(
        cfg, w.n_out, w.n_in, n_rows_x, _sm_count(x2.device), not interpret_mode()
    )
    out = torch.empty(n_rows_x, w.n_out, dtype=x2.dtype, device=x2.device)
    part = out
    if plan.splits > 1:
        part = torch.empty(plan.splits, n_rows_x, w.n_out, dtype=torch.float32, device=x2.device)
    counters = _COUNTERS.get(x2.device, triton.cdiv(w.n_out, cfg.block_n) * n_rows_x)
    return cfg, plan, out, part, counters


def _dp4a_rows_matmul(
    x2: torch.Tensor,
    w: PackedWeight,
    cfg: gemv_dp4a_rows.RowsConfig,
    quantized: QuantizedActivation | None,
) -> torch.Tensor:
    """The integer GEMV with every row of x2 in one program (gemv_dp4a_rows.py)."""
    out = torch.empty(x2.shape[0], w.n_out, dtype=x2.dtype, device=x2.device)
    counters = _COUNTERS.get(x2.device, triton.cdiv(w.n_out, cfg.block_n))
    gemv_dp4a_rows.launch(w, x2, quantized, out, counters, cfg, not interpret_mode())
    return out
