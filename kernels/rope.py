"""RoPE applied by a Triton kernel, for every layout and scaling type of rope_tables.Rope.

    out[j] = x[j] * cos(pos * f[i(j)]) * mscale + sign(j) * x[partner(j)] * sin(...) * mscale
    normal: i(j) = j // 2,  partner = j ^ 1,             sign = -1 for even j
    neox:   i(j) = j mod n_rot/2, partner = j +- n_rot/2, sign = -1 for the first half
    dims j >= n_rot pass through unchanged.

`apply_rope` can also add a bias and RMS-norm each head first, in the same launch (the
engine's Q, K and V out of one GEMV: gpt-oss's and Qwen2's biases, Qwen3's q_norm / k_norm,
three to six launches a layer fewer at decode), and pass heads through unrotated (V's, for
their bias). The angle is computed in float32, as ggml does. `rope_rows` is the same arithmetic
for the KV cache's write kernel (kv_write.py), which can take Q, K and V of a step in one launch:
Q's heads normed and rotated, K's on their way into the cache.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor
from kernels.rope_tables import Rope


@dataclass(frozen=True)
class QKNorms:
    """Each head's RMSNorm before RoPE (Qwen3, Gemma 3): heads 0..n_q_heads-1 by q_weight [D],
    the next ones by k_weight [D] (float32)."""

    q_weight: torch.Tensor
    k_weight: torch.Tensor
    n_q_heads: int
    eps: float


@triton.jit
def _rotation(pos, inv_freq_ptr, mscale, D: tl.constexpr, N_ROT: tl.constexpr,
              NEOX: tl.constexpr):  # fmt: skip
    """(partner [D], cos [D], signed sin [D]) for position `pos`: y = x cos + x[partner] sin."""
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
    return partner, cos, sign * sin


@triton.jit
def norm_and_rotate(x, xp, cos, sin, w, wp, normed, eps, D: tl.constexpr,
                    HAS_NORM: tl.constexpr):  # fmt: skip
    """Rows x [R, D] and their partners' values xp (x gathered at `partner`), each row RMS-normed
    by weights w (wp at the partners) where `normed` (HAS_NORM), then rotated: x cos + xp sin.
    One body for RoPE's launch, the KV write's (kv_write.py) and the decode attention's that
    writes a step's row (decode_attention.py, without norms): the same bits for a head in
    each, but for the norm's sum of squares, which follows each kernel's layout (an ulp apart
    at most). Summing it in a fixed tree instead (tree_sums.tree_sum) took Qwen3-30B-A3B's
    512-token prompt from 45 to 88 ms on an H200
    (docs/decisions/2026-11-30-kv-write-in-the-attention.md)."""
    if HAS_NORM:
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)[:, None]
        x = tl.where(normed, x * rstd * w, x)
        xp = tl.where(normed, xp * rstd * wp, xp)
    return x * cos + xp * sin


@triton.jit
def rope_rows(row_ptrs, row_mask, pos, inv_freq_ptr, mscale, bias_ptrs, norm_ptr, eps,
              D: tl.constexpr, N_ROT: tl.constexpr, NEOX: tl.constexpr,
              HAS_BIAS: tl.constexpr = False, HAS_NORM: tl.constexpr = False):  # fmt: skip
    """Rows [R, D] at row_ptrs [R] (element pointers), each + its bias row at bias_ptrs [R]
    (float32; HAS_BIAS), RMS-normed by the [D] weights at norm_ptr (HAS_NORM), rotated for
    position `pos`, in f32: _rope_kernel's arithmetic for its heads (the KV write's fused
    RoPE, kv_write.py)."""
    j = tl.arange(0, D)[None, :]
    partner, cos, sin = _rotation(pos, inv_freq_ptr, mscale, D, N_ROT, NEOX)
    partner = partner[None, :]
    mask = row_mask[:, None]
    rows = row_ptrs[:, None]
    x = tl.load(rows + j, mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(rows + partner, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias_ptrs[:, None] + j, mask=mask, other=0.0)
        xp += tl.load(bias_ptrs[:, None] + partner, mask=mask, other=0.0)
    w = tl.zeros((1, D), tl.float32)  # no norm: unread (the weights' shape, whatever R is)
    wp = w
    if HAS_NORM:
        w = tl.load(norm_ptr + j)
        wp = tl.load(norm_ptr + partner)
    return norm_and_rotate(x, xp, cos[None, :], sin[None, :], w, wp, mask, eps, D, HAS_NORM)


@triton.jit
def _rope_kernel(x_ptr, out_ptr, pos_ptr, inv_freq_ptr, mscale, H, stride_xt, stride_xh,
                 bias_ptr, q_norm_ptr, k_norm_ptr, eps, H_Q, H_ROT,
                 HEADS: tl.constexpr, D: tl.constexpr, N_ROT: tl.constexpr, NEOX: tl.constexpr,
                 HAS_BIAS: tl.constexpr, HAS_NORM: tl.constexpr):  # fmt: skip
    """Heads [HEADS] of token t: (+ bias) (RMS-normed per head: heads < H_Q by q_norm, the
    rest by k_norm) rotated; heads from H_ROT on (V's, where the caller passes them) only get
    their bias."""
    t = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    mask = (heads < H)[:, None]
    pos = tl.load(pos_ptr + t)
    j = tl.arange(0, D)[None, :]
    partner, cos, sin = _rotation(pos, inv_freq_ptr, mscale, D, N_ROT, NEOX)
    rotated = (heads < H_ROT)[:, None]
    partner = tl.where(rotated, partner[None, :], j)
    cos = tl.where(rotated, cos[None, :], 1.0)
    sin = tl.where(rotated, sin[None, :], 0.0)
    rows = (x_ptr + t * stride_xt + heads * stride_xh)[:, None]
    x = tl.load(rows + j, mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(rows + partner, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        at = bias_ptr + heads[:, None] * D
        x += tl.load(at + j, mask=mask, other=0.0)
        xp += tl.load(at + partner, mask=mask, other=0.0)
    w = x  # no norm: unread
    wp = x
    if HAS_NORM:
        is_q = (heads < H_Q)[:, None]
        w = tl.where(is_q, tl.load(q_norm_ptr + j), tl.load(k_norm_ptr + j))
        wp = tl.where(is_q, tl.load(q_norm_ptr + partner), tl.load(k_norm_ptr + partner))
    normed = (heads < H_ROT)[:, None]  # V's heads are not normed
    y = norm_and_rotate(x, xp, cos, sin, w, wp, normed, eps, D, HAS_NORM)
    out = out_ptr + (t * H + heads)[:, None] * D
    tl.store(out + j, y.to(out_ptr.dtype.element_ty), mask=mask)


# Programs per token: a decode step (one token, 40 heads of Llama-3-8B's Q and K) took one
# program of ~5 us, all latency; a program per head runs them side by side. Prefill chunks
# have programs enough from their tokens, so they keep a few heads per program.
_MIN_PROGRAMS = 256


@functools.cache
def _inv_freq_on(rope: Rope, device: torch.device) -> torch.Tensor:
    return torch.tensor(rope.inv_freq, dtype=torch.float32, device=device)


def inv_freq_tensor(rope: Rope, device: torch.device) -> torch.Tensor:
    return _inv_freq_on(rope, torch.device(device))


def apply_rope(x: torch.Tensor, positions: torch.Tensor, rope: Rope, *,
               bias: torch.Tensor | None = None, norms: QKNorms | None = None,
               n_rotated: int | None = None) -> torch.Tensor:  # fmt: skip
    """x [T, H, D] (last axis contiguous), positions int [T] -> a new rotated tensor in x's
    dtype. In the same launch, before the rotation (a decode step's Q and K side by side out
    of one GEMV: the launches between them and RoPE saved): `bias` [H D] float32 added (Q's,
    K's and V's biases, gpt-oss), `norms` each head's RMSNorm (Qwen3's q_norm, k_norm);
    `n_rotated`: only heads 0..n_rotated-1 are normed and rotated, the rest (V's, passed
    through for their bias) are copied."""
    require()
    if x.dim() != 3 or x.shape[-1] != rope.head_dim or x.stride(-1) != 1:
        raise UnsupportedTensor(
            f"RoPE input of shape {tuple(x.shape)}: need [tokens, heads, {rope.head_dim}]"
        )
    if rope.head_dim & (rope.head_dim - 1):
        raise UnsupportedTensor(f"RoPE head size {rope.head_dim}: need a power of two")
    n_tokens, n_heads, d = x.shape
    n_rotated = n_heads if n_rotated is None else n_rotated
    if bias is not None and bias.numel() != n_heads * d:
        raise UnsupportedTensor(f"RoPE bias of {bias.numel()} values for {n_heads} heads of {d}")
    if norms is not None and not 0 <= norms.n_q_heads <= n_rotated:
        raise UnsupportedTensor(f"{norms.n_q_heads} query heads of {n_rotated} rotated")
    out = torch.empty(n_tokens, n_heads, rope.head_dim, dtype=x.dtype, device=x.device)
    if n_tokens == 0:
        return out
    positions = positions.to(device=x.device, dtype=torch.int32).contiguous()
    heads = triton.next_power_of_2(n_heads)
    while heads > 1 and n_tokens * triton.cdiv(n_heads, heads) < _MIN_PROGRAMS:
        heads //= 2
    inv_freq = inv_freq_tensor(rope, x.device)
    q_norm, k_norm = (norms.q_weight, norms.k_weight) if norms is not None else (out, out)
    _rope_kernel[(n_tokens, triton.cdiv(n_heads, heads))](
        x, out, positions, inv_freq, rope.mscale, n_heads, x.stride(0), x.stride(1),
        bias if bias is not None else out, q_norm, k_norm,
        norms.eps if norms is not None else 0.0, norms.n_q_heads if norms is not None else 0,
        n_rotated, HEADS=heads, D=rope.head_dim, N_ROT=rope.n_rot, NEOX=rope.neox,
        HAS_BIAS=bias is not None, HAS_NORM=norms is not None,
        num_warps=max(1, min(4, heads * rope.head_dim // 256)),
    )  # fmt: skip
    return out
