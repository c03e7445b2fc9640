"""The integer GEMV (8-bit activations, dp4a) and its activation quantizer, against numpy.

Two references: x' @ W.T in float64 with x' = reference.quantize_activation(x) (what the kernel
computes: tight), and x @ W.T (what 8-bit activations cost: loose, as in llama.cpp)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels import gemv, reference
from kernels.act_quant import dp4a, quantize_activation
from kernels.errors import UnsupportedTensor
from kernels.gemv import GemvConfig, quant_matmul
from kernels.packed_weight import PackedWeight
from tests.kernels.conftest import relative_error

EXACT = 5e-4  # against x' @ W.T: float32 sums, and a rare rounding tie decided the other way
ACTIVATION_ERROR = 2e-2  # against x @ W.T: 8-bit x costs 0.3-0.9% on these random weights
ONE_STEP = GemvConfig(4, 16, 1, path="dp4a", chained=True, early_next=True, one_step=True)
# a K loop of 2 super-blocks a step, chained: long_rows' loop, at the interpreter's sizes
LOOP_PDL_4X2 = GemvConfig(4, 2, 1, path="dp4a", chained=True, early_next=True)
# every way the engine's configs cut the work, at the interpreter's sizes (40 x 2048 on its 4
# "SMs" takes split-K in the K loops)
CONFIGS = {
    "loop-16x2": GemvConfig(16, 2, 1, path="dp4a"),
    "loop-16x1": GemvConfig(16, 1, 1, path="dp4a"),
    # 4 rows x 16 super-blocks, 2 warps, early next launch; Q4_K rows in the thread; rows
    # longer than a step: a K loop (long_rows)
    "default": gemv.default_config("Q4_K", 1),
    "default-q6_k": gemv.default_config("Q6_K", 1),
    # chained, the next launch let start once the last step is computed (not early)
    "chained-16x1": GemvConfig(16, 1, 1, path="dp4a", chained=True),
    "chained-4x16": GemvConfig(4, 16, 1, path="dp4a", chained=True),
    # K split into one step per program (whole_steps), with and without the early next launch
    "onestep-4x4": GemvConfig(4, 4, 1, path="dp4a", one_step=True),
    "onestep-early-4x16": ONE_STEP,
    "onestep-early-4x16-w2": dataclasses.replace(ONE_STEP, num_warps=2),
    "onestep-early-8x16": dataclasses.replace(ONE_STEP, block_n=8),
    # a chained K loop (2 SB steps: 768 ends on a masked half step, 2048 in split-K)
    "loop-pdl-4x2": LOOP_PDL_4X2,
    # the config chosen by row length: rows up to 4 SB take the outer config, longer ones
    # long_rows
    "long-rows": dataclasses.replace(
        ONE_STEP,
        blocks_per_tile=4,
        long_rows=dataclasses.replace(LOOP_PDL_4X2, num_warps=2),
    ),
    "2x16": dataclasses.replace(ONE_STEP, block_n=2),
    # rows in the thread (x's words loaded once for several rows): one step, a K loop, and 8
    # rows a program
    "rit-4x16-w2": dataclasses.replace(ONE_STEP, num_warps=2, rows_in_thread=True),
    "rit-loop-pdl-4x2": dataclasses.replace(LOOP_PDL_4X2, rows_in_thread=True),
    "rit-8x16-w8": dataclasses.replace(ONE_STEP, block_n=8, num_warps=8, rows_in_thread=True),
}


def test_up_to_dp4a_max_rows_of_q4_k_and_q6_k_take_the_integer_path():
    assert CONFIGS["default"].path == CONFIGS["default-q6_k"].path == "dp4a"
    for fmt in ("Q4_K", "Q6_K"):
        assert gemv.default_config(fmt, gemv.DP4A_MAX_ROWS).path == "dp4a"
        assert gemv.default_config(fmt, gemv.DP4A_MAX_ROWS + 1).path == "float"
    assert gemv.default_config("Q8_0", 2).path == "float"


@functools.lru_cache(maxsize=2)
def _case(fmt, n_out, n_in, rows, device, seed):
    """Weights, x and both references, computed once per case (the 8B shapes' numpy
    dequantization takes seconds, and every variant reuses it)."""
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=seed)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device=device)
    x = torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed + 1))
    dequantized = reference.dequantize_weight(raw, fmt, (n_out, n_in)).astype(np.float64)
    exact = reference.quantize_activation(x.numpy()) @ dequantized.T
    return w, x, exact, x.double().numpy() @ dequantized.T


def _check(fmt, n_out, n_in, rows, config, device, seed=0):
    w, x, exact, unrounded = _case(fmt, n_out, n_in, rows, device, seed)
    y = quant_matmul(x.to(device), w, config).cpu()
    assert y.shape == (rows, n_out)
    assert relative_error(y, exact) < EXACT
    assert relative_error(y, unrounded) < ACTIVATION_ERROR
    return y


# Variants that differ from one above only in warps (which the interpreter ignores) or in tile
# sizes of a path another variant takes: checked on the GPU only, where each compiles to its
# own layout; the interpreter runs every path once per shape.
GPU_ONLY = {
    "loop-16x2", "chained-16x1", "onestep-early-4x16-w2", "onestep-early-8x16", "2x16",
    "rit-8x16-w8",
}  # fmt: skip


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize(
    "variant",
    [pytest.param(v, marks=pytest.mark.gpu) if v in GPU_ONLY else v for v in CONFIGS],
)
@pytest.mark.parametrize(("n_out", "n_in", "rows"), [(37, 768, 1), (32, 1024, 2), (40, 2048, 1)])
def test_matches_references(fmt, variant, n_out, n_in, rows, device):
    """Ragged rows (37, 40), whole tiles (32 x 1024), split-K (40 x 2048 on the interpreter's
    4 SMs), several input rows."""
    _check(fmt, n_out, n_in, rows, CONFIGS[variant], device)


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_split_k_counters_reset_for_the_next_call(fmt, device):
    """Split-K over 2 input rows (each (tile, input row) has its own ticket counter): the last
    program of each resets it, so a second call gives the same result and the counters are
    back at zero."""
    cfg = CONFIGS["loop-16x2"]
    raw = reference.random_weight_bytes(fmt, 16, 2048, seed=3)
    w = PackedWeight.from_gguf(raw, fmt, (16, 2048), device=device)
    x = torch.randn(2, 2048)
    _per_split, splits = gemv.split_plan(8, cfg.blocks_per_tile, 2, gemv._sm_count(x.device))
    assert splits > 1 or device == "cuda"  # the interpreter's 4 "SMs" make this one split-K
    first = quant_matmul(x.to(device), w, cfg)
    second = quant_matmul(x.to(device), w, cfg)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert int(gemv._COUNTERS.get(first.device, 1).abs().sum()) == 0
    exact = reference.gemv(reference.quantize_activation(x.numpy()), raw, fmt, (16, 2048))
    assert relative_error(first.cpu(), exact) < EXACT


def test_zero_input_groups_give_zero(device):
    """A group of 32 zeros has no scale (max |x| = 0): it must contribute 0, not NaN."""
    raw = reference.random_weight_bytes("Q4_K", 16, 512, seed=4)
    w = PackedWeight.from_gguf(raw, "Q4_K", (16, 512), device=device)
    x = torch.randn(1, 512)
    x[:, 64:160] = 0.0
    y = quant_matmul(x.to(device), w, CONFIGS["loop-16x2"]).cpu()
    expected = reference.gemv(reference.quantize_activation(x.numpy()), raw, "Q4_K", (16, 512))
    assert relative_error(y, expected) < EXACT


def test_half_precision_inputs_and_output(device):
    raw = reference.random_weight_bytes("Q6_K", 24, 1024, seed=5)
    w = PackedWeight.from_gguf(raw, "Q6_K", (24, 1024), device=device)
    x = torch.randn(1, 1024).to(torch.float16)
    y = quant_matmul(x.to(device), w, CONFIGS["loop-16x2"])
    assert y.dtype == torch.float16
    expected = reference.gemv(
        reference.quantize_activation(x.float().numpy()), raw, "Q6_K", (24, 1024)
    )
    assert relative_error(y.float().cpu(), expected) < EXACT + 2e-3


def test_quantize_activation_matches_numpy(device):
    x = torch.randn(3, 512) * torch.linspace(0.01, 10.0, 512)
    quantized = quantize_activation(x.to(device))
    xq, xd, xs = quantized.words, quantized.scales, quantized.sums
    assert quantized.shape == (3, 512)
    q = xq.cpu().contiguous().view(torch.int8).reshape(3, 16, 32).to(torch.float64)
    values = (q * xd.cpu().to(torch.float64)[:, :, None]).reshape(3, 512).numpy()
    np.testing.assert_allclose(
        values, reference.quantize_activation(x.numpy()), rtol=1e-6, atol=1e-6
    )
    assert q.abs().max() <= 127
    np.testing.assert_array_equal(xs.cpu().numpy(), q.reshape(3, 32, 16).sum(-1).numpy())


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_a_shared_quantized_input_gives_the_same_result(fmt, device):
    """q/k/v (or gate/up) share one quantize_activation: bit for bit what each call gets alone."""
    raw = reference.random_weight_bytes(fmt, 24, 1024, seed=7)
    w = PackedWeight.from_gguf(raw, fmt, (24, 1024), device=device)
    x = torch.randn(1, 1024).to(device)
    shared = quantize_activation(x)
    alone = quant_matmul(x, w)
    torch.testing.assert_close(quant_matmul(x, w, quantized=shared), alone, rtol=0, atol=0)


def test_a_quantized_input_of_another_shape_is_refused(device):
    raw = reference.random_weight_bytes("Q4_K", 8, 512, seed=8)
    w = PackedWeight.from_gguf(raw, "Q4_K", (8, 512), device=device)
    x = torch.randn(1, 512).to(device)
    other = quantize_activation(torch.randn(1, 1024).to(device))
    with pytest.raises(UnsupportedTensor, match="quantize the same x"):
        quant_matmul(x, w, quantized=other)


@pytest.mark.parametrize(("fmt", "rows"), [("Q4_0", 1), ("Q8_0", 2)])
def test_the_float_path_ignores_a_quantized_input(fmt, rows, device):
    """Formats without an integer kernel, and Q8_0 past one row, read x itself, unrounded."""
    raw = reference.random_weight_bytes(fmt, 8, 512, seed=9)
    w = PackedWeight.from_gguf(raw, fmt, (8, 512), device=device)
    x = torch.randn(rows, 512)
    y = quant_matmul(x.to(device), w, quantized=quantize_activation(x.to(device))).cpu()
    assert relative_error(y, reference.gemv(x.numpy(), raw, fmt, (8, 512))) < 1e-5


def test_rows_that_are_not_whole_32s_are_refused(device):
    with pytest.raises(UnsupportedTensor, match="whole 32s"):
        quantize_activation(torch.randn(1, 48).to(device))


@triton.jit
def _dp4a_both(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + i)
    b = tl.load(b_ptr + i)
    tl.store(out_ptr + i, dp4a(a, b, i, True))
    tl.store(out_ptr + BLOCK + i, dp4a(a, b, i, False))


@pytest.mark.gpu
def test_dp4a_assembly_agrees_with_the_interpreter_path():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    n = 4096
    a = torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
    b = torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
    out = torch.empty(2 * n, dtype=torch.int32, device="cuda")
    _dp4a_both[(1,)](a, b, out, BLOCK=n)
    ua = a.cpu().view(torch.uint8).reshape(n, 4).to(torch.int64)
    sb = b.cpu().view(torch.int8).reshape(n, 4).to(torch.int64)
    expected = (ua * sb).sum(1) + torch.arange(n)
    assert torch.equal(out[:n].cpu().to(torch.int64), expected)
    assert torch.equal(out[n:].cpu().to(torch.int64), expected)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(CONFIGS))
@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("shape", [(1024, 4096), (4096, 4096)])
def test_llama3_8b_shapes(shape, fmt, variant):
    """Variants innermost: each case's weights and references are made once."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _check(fmt, *shape, 1, CONFIGS[variant], "cuda", seed=6)


@functools.lru_cache(maxsize=1)
def _half_case(fmt, n_out, n_in):
    """Weights on the GPU, an f16 x (the benchmark's kernel specializations, so the compiles
    are shared with it) and x' @ W.T in float64."""
    raw = reference.random_weight_bytes(fmt, n_out, n_in, seed=12)
    w = PackedWeight.from_gguf(raw, fmt, (n_out, n_in), device="cuda")
    x = torch.randn(1, n_in, generator=torch.Generator().manual_seed(13)).to(torch.float16)
    exact = reference.gemv(
        reference.quantize_activation(x.float().numpy()), raw, fmt, (n_out, n_in)
    )
    return w, x.cuda(), exact


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("shape", [(4096, 14336), (4096, 4096), (1024, 4096)])
def test_the_default_at_llama3_8b_shapes(shape, fmt):
    """The engine's config, f16 in and out, on the rows of ffn_down (longer than a step),
    attn_q/o and attn_k/v."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    w, x, exact = _half_case(fmt, *shape)
    y = quant_matmul(x, w)
    assert y.dtype == torch.float16
    assert relative_error(y.float().cpu(), exact) < EXACT + 2e-3  # f16 output rounding
    again = quant_matmul(x, w)  # split-K counters were reset
    torch.testing.assert_close(again, y, rtol=0, atol=0)


def test_the_plan_by_row_length():
    """long_rows serves rows longer than a step and keeps the caller's launch flags; one_step
    cuts a row into whole steps (56 super-blocks: 7 of 8)."""
    long = dataclasses.replace(ONE_STEP, num_warps=2)
    cfg = dataclasses.replace(ONE_STEP, long_rows=long)
    short, plan = gemv.dp4a_plan(cfg, 4096, 4096, 1, 132, True)
    assert short == cfg and (plan.splits, plan.blocks_per_split, plan.even) == (1, 16, True)
    chosen, plan = gemv.dp4a_plan(cfg, 4096, 14336, 1, 132, True)
    assert chosen.num_warps == 2 and (plan.splits, plan.blocks_per_split) == (7, 8)
    assert plan.even
    plain = dataclasses.replace(cfg, chained=False, early_next=False)
    chosen, _ = gemv.dp4a_plan(plain, 4096, 14336, 1, 132, True)
    assert not chosen.chained and not chosen.early_next


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K"])
def test_the_default_on_rows_longer_than_a_step(fmt, device):
    """18 super-blocks (more than one step of 16): the default's long_rows K loop (steps of 8
    for Q4_K, the last of 3 masked to 2; of 16 for Q6_K, the second masked to 2), ragged rows."""
    assert gemv.default_config(fmt, 1).long_rows is not None
    _check(fmt, 37, 4608, 1, None, device, seed=14)


def test_the_plan_takes_eight_rows_a_program_for_tall_q4_k_matrices():
    """default_config's tall_rows: Q4_K matrices of TALL_ROWS output rows or more (gate/up)
    take 8 rows a program, keeping the caller's launch flags; fewer rows (Q+K+V, attn_q/o) and
    rows longer than a step (ffn_down: the K loop) do not; Q6_K has no tall config."""
    cfg = gemv.default_config("Q4_K", 1)
    tall, _ = gemv.dp4a_plan(cfg, gemv.TALL_ROWS, 4096, 1, 132, True)
    assert (tall.block_n, tall.rows_in_thread, tall.num_warps) == (8, True, 2)
    assert gemv.dp4a_plan(cfg, 6144, 4096, 1, 132, True)[0].block_n == 4
    assert gemv.dp4a_plan(cfg, 28672, 14336, 1, 132, True)[0] == dataclasses.replace(
        cfg.long_rows, chained=cfg.chained, early_next=cfg.early_next
    )
    plain = dataclasses.replace(cfg, chained=False, early_next=False)
    chosen, _ = gemv.dp4a_plan(plain, 14336, 4096, 1, 132, True)
    assert chosen.block_n == 8 and not chosen.chained and not chosen.early_next
    assert gemv.default_config("Q6_K", 1).tall_rows is None


def test_the_default_on_a_tall_q4_k_matrix(device, monkeypatch):
    """The tall config computes what the reference does: ragged rows (a last tile of 3 of its
    8), the threshold lowered so that the interpreter's shape is tall."""
    monkeypatch.setattr(gemv, "TALL_ROWS", 16)
    assert gemv.dp4a_plan(gemv.default_config("Q4_K", 1), 35, 768, 1, 132, True)[0].block_n == 8
    _check("Q4_K", 35, 768, 1, gemv.default_config("Q4_K", 1), device, seed=15)


@pytest.mark.gpu
def test_the_default_at_gate_up_rows_on_the_gpu():
    """The tall config at ffn_gate/up's 14336 rows of 4096 (f16 in and out), as the engine
    launches it, against x' @ W.T."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    w, x, exact = _half_case("Q4_K", 14336, 4096)
    assert gemv.dp4a_plan(gemv.default_config("Q4_K", 1), 14336, 4096, 1, 132, True)[0].block_n == 8
    y = quant_matmul(x, w)
    assert relative_error(y.float().cpu(), exact) < EXACT + 2e-3
