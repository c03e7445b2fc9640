"""RoPE frequency tables for the scaling types GGUF models use (numpy; no torch needed).

Each rotary pair i (0 <= i < n_rot/2) turns by angle pos * inv_freq[i]; cos and sin are then
multiplied by mscale. The scaling types change only inv_freq and mscale, so one kernel serves
all of them:

    none:    inv_freq[i] = base^(-2i/n_rot)
    linear:  inv_freq[i] = base^(-2i/n_rot) / factor                  (rope.scaling.factor)
    yarn:    ggml's rope_yarn: theta = (1 - ramp) * theta / factor + ramp * theta, ramp from the
             correction dims for beta_fast=32, beta_slow=1 over the original context;
             mscale = attn_factor * (1 + 0.1 ln(factor))
    llama3:  GGUF stores the factors as the tensor rope_freqs.weight (inv_freq[i] / ff[i]); pass
             them as `freq_factors`, or let `llama3_freq_factors` compute them from the
             rope.scaling parameters (Llama 3.1's formula).

Layouts: "normal" (ggml's default, GPT-J style) rotates pairs (2i, 2i+1); "neox" (Qwen,
Gemma, Phi, GPT-NeoX) rotates pairs (i, i + n_rot/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernels.errors import UnsupportedTensor

SCALING_TYPES = ("none", "linear", "yarn", "llama3")


@dataclass(frozen=True, eq=False)  # hashed by identity: kernels cache its device table
class Rope:
    head_dim: int
    n_rot: int
    neox: bool
    inv_freq: np.ndarray  # float64 [n_rot/2]
    mscale: float

    @classmethod
    def from_gguf_params(
        cls,
        head_dim: int,
        n_rot: int | None = None,
        base: float = 10000.0,
        layout: str = "normal",
        scaling: str = "none",
        factor: float = 1.0,
        original_context: int = 0,
        attn_factor: float = 1.0,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        freq_factors: np.ndarray | None = None,
    ) -> Rope:
        n_rot = head_dim if n_rot is None else n_rot
        if layout not in ("normal", "neox"):
            raise UnsupportedTensor(f"RoPE layout {layout!r}: use 'normal' or 'neox'")
        if scaling not in SCALING_TYPES:
            raise UnsupportedTensor(
                f"RoPE scaling type {scaling!r}: supported are {', '.join(SCALING_TYPES)}"
            )
        if n_rot % 2 or not 0 < n_rot <= head_dim:
            raise UnsupportedTensor(f"RoPE over {n_rot} of {head_dim} dims: need an even n_rot")
        i = np.arange(n_rot // 2, dtype=np.float64)
        inv_freq = base ** (-2.0 * i / n_rot)
        mscale = attn_factor
        if scaling == "linear":
            inv_freq = inv_freq / factor
        elif scaling == "yarn":
            low, high = _yarn_corr_dims(n_rot, original_context, base, beta_fast, beta_slow)
            ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
            inv_freq = inv_freq / factor * (1.0 - ramp) + inv_freq * ramp
            mscale = attn_factor * (1.0 + 0.1 * math.log(factor)) if factor > 1 else attn_factor
        elif scaling == "llama3" and freq_factors is None:
            freq_factors = llama3_freq_factors(n_rot, base, factor, original_context)
        if freq_factors is not None:
            inv_freq = inv_freq / np.asarray(freq_factors, dtype=np.float64)[: n_rot // 2]
        return cls(head_dim, n_rot, layout == "neox", inv_freq, float(mscale))


def _yarn_corr_dims(n_rot, original_context, base, beta_fast, beta_slow) -> tuple[float, float]:
    """ggml_rope_yarn_corr_dims: the pair indices between which YaRN blends."""
    if original_context <= 0:
        raise UnsupportedTensor(
            "YaRN RoPE needs the original context (rope.scaling.original_context_length)"
        )

    def corr_dim(n_rotations: float) -> float:
        return (
            n_rot * math.log(original_context / (n_rotations * 2 * math.pi)) / (2 * math.log(base))
        )

    low = max(0.0, math.floor(corr_dim(beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr_dim(beta_slow)))
    return low, high


def llama3_freq_factors(
    n_rot: int,
    base: float,
    factor: float = 8.0,
    original_context: int = 8192,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> np.ndarray:
    """What convert_hf_to_gguf.py writes as rope_freqs.weight for Llama 3.1 scaling."""
    inv_freq = base ** (-2.0 * np.arange(n_rot // 2, dtype=np.float64) / n_rot)
    wavelen = 2 * math.pi / inv_freq
    low_wavelen = original_context / low_freq_factor
    high_wavelen = original_context / high_freq_factor
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    factors = np.where(wavelen < high_wavelen, 1.0, 0.0)
    factors = np.where(wavelen > low_wavelen, factor, factors)
    middle = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(middle, 1.0 / ((1 - smooth) / factor + smooth), factors)
