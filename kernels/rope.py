"""RoPE applied by a Triton kernel, for every layout and scaling type of rope_tables.Rope.

    out[j] = x[j] * cos(pos * f[i(j)]) * mscale + sign(j) * x[partner(j)] * sin(...) * mscale
    normal: i(j) = j // 2,  partner = j ^ 1,             sign = -1 for even j
    neox:   i(j) = j mod n_rot/2, partner = j +- n_rot/2, sign = -1 for the first half
    dims j >= n_rot pass through unchanged.

The angle is computed in float32, as ggml does. `rope_rows` is also used by the KV cache's write
kernel, which applies RoPE to K on its way into the cache.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.rope_tables import Rope


@triton.jit
def rope_rows(row_ptrs, row_mask, pos, inv_freq_ptr, mscale,
              D: tl.constexpr, N_ROT: tl.constexpr, NEOX: tl.constexpr):  # fmt: skip
    """Rows [R, D] at row_ptrs [R] (element pointers), rotated for position `pos`, in f32."""
    j = tl.arange(0, D)
    HALF: tl.constexpr = N_ROT // 2
    if NEOX:
        freq = tl.where(j < HALF, j, j - HALF)
        partner = tl.where(j < HALF, j + HALF, j - HALF)
        sign = tl.where(j < HALF, -1.0, 1.0)
    else:
        freq = j // 2
        partner = j ^ 1
        sign = tl.where(j % 2 == 0, -1.0, 1.0)
    rotated = j < N_ROT
    freq = tl.where(rotated, freq, 0)
    partner = tl.where(rotated, partner, j)
    angle = pos.to(tl.float32) * tl.load(inv_freq_ptr + freq)
    cos = tl.where(rotated, tl.cos(angle) * mscale, 1.0)
    sin = tl.where(rotated, tl.sin(angle) * mscale, 0.0)
    mask = row_mask[:, None]
    x = tl.load(row_ptrs[:, None] + j[None, :], mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(row_ptrs[:, None] + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    return x * cos[None, :] + xp * (sign * sin)[None, :]


@triton.jit
def _rope_kernel(x_ptr, out_ptr, pos_ptr, inv_freq_ptr, mscale, H, stride_xt, stride_xh,
                 HEADS: tl.constexpr, D: tl.constexpr, N_ROT: tl.constexpr,
                 NEOX: tl.constexpr):  # fmt: skip
    t = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    mask = heads < H
    pos = tl.load(pos_ptr + t)
    y = rope_rows(x_ptr + t * stride_xt + heads * stride_xh, mask, pos, inv_freq_ptr, mscale,
                  D, N_ROT, NEOX)  # fmt: skip
    j = tl.arange(0, D)
    out = out_ptr + (t * H + heads)[:, None] * D
    tl.store(out + j[None, :], y.to(out_ptr.dtype.element_ty), mask=mask[:, None])


# Programs per token: a decode step (one token, 40 heads of Llama-3-8B's Q and K) took one
# program of ~5 us, all latency; a program per head runs them side by side. Prefill chunks
# have programs enough from their tokens, so they keep a few heads per program.
_MIN_PROGRAMS = 256


@functools.cache
def _inv_freq_on(rope: Rope, device: torch.device) -> torch.Tensor:
    return torch.tensor(rope.inv_freq, dtype=torch.float32, device=device)


def inv_freq_tensor(rope: Rope, device: torch.device) -> torch.Tensor:
    return _inv_freq_on(rope, torch.device(device))


def apply_rope(x: torch.Tensor, positions: torch.Tensor, rope: Rope) -> torch.Tensor:
    """x [T, H, D] (last axis contiguous), positions int [T] -> a new rotated tensor."""
    require()
    if x.dim() != 3 or x.shape[-1] != rope.head_dim or x.stride(-1) != 1:
        raise UnsupportedTensor(
            f"RoPE input of shape {tuple(x.shape)}: need [tokens, heads, {rope.head_dim}]"
        )
    if rope.head_dim & (rope.head_dim - 1):
        raise UnsupportedTensor(f"RoPE head size {rope.head_dim}: need a power of two")
    n_tokens, n_heads, _ = x.shape
    out = torch.empty(n_tokens, n_heads, rope.head_dim, dtype=x.dtype, device=x.device)
    if n_tokens == 0:
        return out
    positions = positions.to(device=x.device, dtype=torch.int32).contiguous()
    heads = triton.next_power_of_2(n_heads)
    while heads > 1 and n_tokens * triton.cdiv(n_heads, heads) < _MIN_PROGRAMS:
        heads //= 2
    inv_freq = inv_freq_tensor(rope, x.device)
    _rope_kernel[(n_tokens, triton.cdiv(n_heads, heads))](
        x, out, positions, inv_freq, rope.mscale, n_heads, x.stride(0), x.stride(1),
        HEADS=heads, D=rope.head_dim, N_ROT=rope.n_rot, NEOX=rope.neox,
        num_warps=max(1, min(4, heads * rope.head_dim // 256)),
    )  # fmt: skip
    return out
