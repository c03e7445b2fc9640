"""RMSNorm (with the residual add), SwiGLU (each also with its 8-bit output) and RoPE at
Llama-3-8B's widths, one decode row and a 512-token prefill chunk, as rows of the one results
schema (results.py), beside the same math in plain torch (provider "torch"). These ops are tiny
at one row: 32 calls a graph replay, a layer's worth, so that the figure is the op's and not the
replay's latency."""

from __future__ import annotations

import torch

from benchmarks.kernels.cases import FFN, HEAD_DIM, HEADS, HIDDEN
from benchmarks.kernels.results import Row, timed_rows
from benchmarks.kernels.timing import time_calls
from kernels.activations import swiglu, swiglu_quantized
from kernels.norms import rms_norm, rms_norm_quantized
from kernels.rope import apply_rope
from kernels.rope_tables import Rope

REPEATS = 32
ROWS = (1, 512)
EPS = 1e-5


def _per_call(fn) -> float:
    def run() -> None:
        for _ in range(REPEATS):
            fn()

    return time_calls(run) / REPEATS


def _torch_rms_norm(x, weight, residual):
    h = x.float() + residual.float()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return y.to(x.dtype), h.to(x.dtype)


def norm_rows(rows: int, copy_bw: float) -> list[Row]:
    x = torch.randn(rows, HIDDEN, dtype=torch.float16, device="cuda")
    residual = torch.randn_like(x)
    weight = torch.randn(HIDDEN, dtype=torch.float16, device="cuda")
    moved = 4 * x.numel() * 2  # x and the residual read, y and the sum written
    shape = f"{rows}x{HIDDEN} +residual"
    out = []
    for op, provider, fn in (
        ("rms_norm", "hearth", lambda: rms_norm(x, weight, EPS, residual=residual)),
        ("rms_norm", "torch", lambda: _torch_rms_norm(x, weight, residual)),
        ("rms_norm_quantized", "hearth",
         lambda: rms_norm_quantized(x, weight, EPS, residual)),
    ):  # fmt: skip
        out += timed_rows(op, shape, "f16", provider, _per_call(fn), moved, copy_bw)
    return out


def swiglu_rows(rows: int, copy_bw: float) -> list[Row]:
    gate = torch.randn(rows, FFN, dtype=torch.float16, device="cuda")
    up = torch.randn_like(gate)
    moved = 3 * gate.numel() * 2
    shape = f"{rows}x{FFN}"
    out = []
    for op, provider, fn in (
        ("swiglu", "hearth", lambda: swiglu(gate, up)),
        ("swiglu", "torch", lambda: torch.nn.functional.silu(gate) * up),
        ("swiglu_quantized", "hearth", lambda: swiglu_quantized(gate, up)),
    ):
        out += timed_rows(op, shape, "f16", provider, _per_call(fn), moved, copy_bw)
    return out


def _torch_rope(x, positions, inv_freq):
    """The normal (GPT-J) layout: pairs (2i, 2i + 1) rotated by the position's angle."""
    angle = positions.float()[:, None, None] * inv_freq
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return out.flatten(-2).to(x.dtype)


def rope_rows(tokens: int, copy_bw: float) -> list[Row]:
    rope = Rope.from_gguf_params(HEAD_DIM, HEAD_DIM, 500000.0, layout="normal")
    x = torch.randn(tokens, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    positions = torch.arange(4000, 4000 + tokens, dtype=torch.int32, device="cuda")
    inv_freq = torch.tensor(rope.inv_freq, dtype=torch.float32, device="cuda")
    moved = 2 * x.numel() * 2
    shape = f"{tokens}x{HEADS}x{HEAD_DIM}"
    out = []
    for provider, fn in (
        ("hearth", lambda: apply_rope(x, positions, rope)),
        ("torch", lambda: _torch_rope(x, positions, inv_freq)),
    ):
        out += timed_rows("apply_rope", shape, "f16", provider, _per_call(fn), moved, copy_bw)
    return out
