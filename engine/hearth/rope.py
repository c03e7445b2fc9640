"""Rotary position embedding's tables: inverse frequencies (with YaRN's ramp and a model's own
factors), the angles of positions, and what a layer's RoPE needs (RopeTable). The rotation itself
is an op (engine/hearth/ops.py: torch, or kernels/ on a GPU)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.hearth.config import YarnConfig


@dataclass(frozen=True, eq=False)  # by identity: KernelsOps keeps its kernels.Rope
class RopeTable:
    """What RoPE needs: the inverse frequencies (float64 [n_rot/2]), the factor on cos and sin,
    the layout, and the head size."""

    inv_freq: torch.Tensor
    attn_factor: float
    layout: str
    head_dim: int

    @property
    def n_rot(self) -> int:
        return 2 * self.inv_freq.numel()


def rope_angles(
    positions: torch.Tensor, inv_freq: torch.Tensor, attn_factor: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [T, n_rot/2] of positions x inverse frequencies, times attn_factor (ggml's
    rope_yarn without the YaRN ramp: mscale multiplies both)."""
    theta = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]
    return (torch.cos(theta) * attn_factor).float(), (torch.sin(theta) * attn_factor).float()


def inverse_frequencies(
    n_rot: int,
    base: float,
    scale: float,
    freq_factors: torch.Tensor | None,
    yarn: YarnConfig | None = None,
) -> torch.Tensor:
    """scale * base^(-2i/n_rot) / factor_i, i < n_rot/2 (ggml_rope_cache_init), in float64.
    With YaRN, pair i mixes the scaled and the unscaled frequency by its ramp (config.py):
    base^(-2i/n_rot) / factor_i * ((1 - r_i) * scale + r_i)."""
    exponents = torch.arange(0, n_rot, 2, dtype=torch.float64) / n_rot
    inv = torch.exp(-exponents * math.log(base))
    if freq_factors is not None:
        inv = inv / freq_factors.to(torch.float64)
    if yarn is None:
        return scale * inv
    low, high = yarn_correction_dims(n_rot, yarn.n_ctx_orig, base, yarn.beta_fast, yarn.beta_slow)
    pair = torch.arange(n_rot // 2, dtype=torch.float64)
    ramp = 1 - ((pair - low) / max(0.001, high - low)).clamp(0, 1)
    return inv * ((1 - ramp) * scale + ramp)


def yarn_correction_dims(
    n_rot: int, n_ctx_orig: int, base: float, beta_fast: float, beta_slow: float
) -> tuple[float, float]:
    """YaRN's ramp ends (ggml_rope_yarn_corr_dims): the pairs that turn beta_fast and
    beta_slow times over the original context, floored and ceiled into [0, n_rot - 1]."""

    def pair_turning(turns: float) -> float:
        return n_rot * math.log(n_ctx_orig / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = math.floor(pair_turning(beta_fast))
    high = math.ceil(pair_turning(beta_slow))
    return float(max(0, low)), float(min(n_rot - 1, high))
