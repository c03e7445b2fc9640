"""kernels/nibbles.py: rot4 and q8 codes to f16, in the interpreter and (gpu) in inline assembly."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels.nibbles import q8_codes_f16, rot4_codes_f16


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
