"""kernels/nibbles.py: rot4 and q8 codes, and Q4_K and Q6_K weights, to f16, in the interpreter and
(gpu) in inline assembly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels.nibbles import q6_k_weights_f16, q8_codes_f16, rot4_codes_f16, scaled_nibbles_f16


@triton.jit
def _codes(b_ptr, out_ptr, BLOCK: tl.constexpr, ASM: tl.constexpr, PURE: tl.constexpr):
    i = tl.arange(0, BLOCK)
    low, high = rot4_codes_f16(tl.load(b_ptr + i), ASM, PURE)
    tl.store(out_ptr + i, low)
    tl.store(out_ptr + BLOCK + i, high)


def _every_byte(device: str, repeats: int = 1) -> torch.Tensor:
    return torch.arange(256, dtype=torch.uint8).repeat(repeats).to(device)


def _expected(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b = b.cpu().to(torch.int32)
    return (b & 15).to(torch.float16), (b >> 4).to(torch.float16)


def _run(b: torch.Tensor, asm: bool, pure: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.full((2 * b.numel(),), -1.0, dtype=torch.float16, device=b.device)
    _codes[(1,)](b, out, BLOCK=b.numel(), ASM=asm, PURE=pure)
    out = out.cpu()
    return out[: b.numel()], out[b.numel() :]


def test_plain_path_gives_both_codes_of_every_byte(device):
    b = _every_byte(device)
    low, high = _run(b, asm=False, pure=True)
    want_low, want_high = _expected(b)
    assert torch.equal(low, want_low)
    assert torch.equal(high, want_high)


@pytest.mark.gpu
@pytest.mark.parametrize("pure", [True, False])
def test_assembly_agrees_with_the_plain_path(pure):
    """Every byte value, in an order that puts different bytes side by side in each 32-bit
    word the assembly reads (a byte's place in its word picks the prmt selector)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    gen = torch.Generator().manual_seed(0)
    b = _every_byte("cpu", repeats=16)[torch.randperm(4096, generator=gen)].cuda()
    want_low, want_high = _expected(b)
    for asm in (True, False):
        low, high = _run(b, asm=asm, pure=pure)
        assert torch.equal(low, want_low), asm
        assert torch.equal(high, want_high), asm


@triton.jit
def _q8_codes(q_ptr, out_ptr, BLOCK: tl.constexpr, ASM: tl.constexpr, PURE: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, q8_codes_f16(tl.load(q_ptr + i), ASM, PURE))


def _every_q8_code(device: str, repeats: int = 1) -> torch.Tensor:
    return torch.arange(-127, 128, dtype=torch.int8).repeat(repeats).to(device)


def _run_q8(q: torch.Tensor, asm: bool, pure: bool) -> torch.Tensor:
    out = torch.full((q.numel(),), -1000.0, dtype=torch.float16, device=q.device)
    _q8_codes[(1,)](q, out, BLOCK=q.numel(), ASM=asm, PURE=pure)
    return out.cpu()


def test_plain_path_gives_every_q8_code(device):
    q = _every_q8_code("cpu", repeats=2)[:256]  # the kernel's block: a power of two
    assert torch.equal(_run_q8(q.to(device), asm=False, pure=True), q.to(torch.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("pure", [True, False])
def test_q8_assembly_agrees_with_the_plain_path(pure):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    gen = torch.Generator().manual_seed(1)
    q = _every_q8_code("cpu", repeats=17)[torch.randperm(255 * 17, generator=gen)][:4096]
    for asm in (True, False):
        assert torch.equal(_run_q8(q.cuda(), asm=asm, pure=pure), q.to(torch.float16)), asm


@triton.jit
def _k_quant_weights(a_ptr, b_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr, Q6: tl.constexpr,
                     RUN: tl.constexpr, ASM: tl.constexpr):  # fmt: skip
    """Rows of 16 bytes, each row with its (scale, offset) pairs s[row, 0..3]."""
    row = tl.arange(0, BLOCK // 16)
    i = row[:, None] * 16 + tl.arange(0, 16)[None, :]
    a = tl.load(a_ptr + i)
    s0 = tl.load(s_ptr + row * 4)[:, None]
    s1 = tl.load(s_ptr + row * 4 + 1)[:, None]
    s2 = tl.load(s_ptr + row * 4 + 2)[:, None]
    s3 = tl.load(s_ptr + row * 4 + 3)[:, None]
    if Q6:
        first, second = q6_k_weights_f16(a, tl.load(b_ptr + i), s0, s2, RUN, ASM)
    else:
        first, second = scaled_nibbles_f16(a, s0, s1, s2, s3, ASM)
    tl.store(out_ptr + i, first)
    tl.store(out_ptr + BLOCK + i, second)


def _k_quant_inputs(device: str, n: int, seed: int):
    """n random bytes (two planes) and for each row of 16 four f16 scales and offsets of
    Q4_K-like sizes (offsets up to 16 scales, so the products and sums have f16 roundings)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 256, (n,), generator=gen, dtype=torch.uint8)
    b = torch.randint(0, 256, (n,), generator=gen, dtype=torch.uint8)
    scale = torch.randn(n // 16, 4, generator=gen) * 1e-2
    scale[:, 1::2] *= 16 * torch.rand(n // 16, 2, generator=gen)
    return a.to(device), b.to(device), scale.half().to(device)


def _expected_k_quant(a, b, s, q6: bool, run: int) -> tuple[np.ndarray, np.ndarray]:
    """Each weight rounded once to f16 from its exact value (float64)."""
    a = a.cpu().numpy().astype(np.int64).reshape(-1, 16)
    b = b.cpu().numpy().astype(np.int64).reshape(-1, 16)
    s = s.cpu().double().numpy()[:, :, None]
    if q6:
        first = ((a & 15) | (((b >> 2 * run) & 3) << 4)) - 32
        second = ((a >> 4) | (((b >> 2 * run + 4) & 3) << 4)) - 32
        values = first * s[:, 0], second * s[:, 2]
    else:
        values = (a & 15) * s[:, 0] + s[:, 1], (a >> 4) * s[:, 2] + s[:, 3]
    return tuple(v.astype(np.float16).reshape(-1) for v in values)


def _run_k_quant(a, b, s, q6: bool, run: int, asm: bool):
    out = torch.full((2 * a.numel(),), -1.0, dtype=torch.float16, device=a.device)
    _k_quant_weights[(1,)](a, b, s, out, BLOCK=a.numel(), Q6=q6, RUN=run, ASM=asm)
    out = out.cpu().numpy()
    return out[: a.numel()], out[a.numel() :]


def _f16_units_apart(x: np.ndarray, y: np.ndarray) -> int:
    return int(np.abs(x.view(np.int16).astype(np.int32) - y.view(np.int16).astype(np.int32)).max())


@pytest.mark.parametrize(("q6", "run"), [(False, 0), (True, 0), (True, 1)])
def test_plain_path_gives_q4_k_and_q6_k_weights(q6, run, device):
    """The plain path rounds in float32 first: equal to the once-rounded f16 but for rare
    double roundings (at most one f16 unit)."""
    a, b, s = _k_quant_inputs(device, 256, seed=2)
    for got, want in zip(_run_k_quant(a, b, s, q6, run, asm=False),
                         _expected_k_quant(a, b, s, q6, run), strict=True):  # fmt: skip
        assert _f16_units_apart(got, want) <= 1
        assert (got == want).mean() > 0.99


@pytest.mark.gpu
@pytest.mark.parametrize(("q6", "run"), [(False, 0), (True, 0), (True, 1)])
def test_k_quant_assembly_rounds_each_weight_once(q6, run):
    """The assembly's FMA (Q4_K) or multiply (Q6_K) on exact codes: every weight equals its
    exact value rounded once to f16, for 4096 random bytes."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    a, b, s = _k_quant_inputs("cuda", 4096, seed=3)
    want = _expected_k_quant(a, b, s, q6, run)
    for got, expected in zip(_run_k_quant(a, b, s, q6, run, asm=True), want, strict=True):
        np.testing.assert_array_equal(got, expected)
