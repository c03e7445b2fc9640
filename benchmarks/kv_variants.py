"""4-bit K layouts from the literature, as numpy codecs for benchmarks/kv_quality.py (not formats
of kernels/ yet: this measures whether one is worth a kernel).

Each codec takes rows [T, heads, D] (one prefill chunk, T consecutive positions starting at a
multiple of the page size) and returns what attention would read back.

    rot4-g16   kernels' rot4 (Walsh-Hadamard rotation, then per token) with groups of 16
               values instead of 32: 6 bits a value.
    kivi4      kernels' kivi4 K (KIVI's): no rotation; per channel over a group of 32 positions,
               4-bit codes with an f16 scale and min per (group, head, channel): 5 bits a
               value. Outlier channels of K get their own range instead of stretching every
               token's.
    kivi4-g64, kivi4-g16  the same over 64 or 16 positions: 4.5 or 6 bits a value.
    kivi4-rot  the same after the rotation (rotation evens the channels out, which per-channel
               quantization no longer needs: measured to see if the two add up).
    smooth-rot4  a per-(page, head, channel) smoothing scale (max |k| of that channel over the
               page, f16), divided out before the rotation and multiplied back after: the
               channel outliers are tamed before rot4's per-token groups (SmoothQuant, applied
               to K as in QServe's SmoothAttention).

The kernel keeps the page being filled in f16 until it is full (KIVI's residual: kv_quality's
+r64); the codecs quantize every full group of a chunk, which is what a finished page holds.
"""

from __future__ import annotations

import numpy as np

from kernels.kv_formats import (
    KIVI_GROUP,
    reference_dequantize,
    reference_quantize,
    reference_roundtrip,
    rotate,
    unrotate,
)

PAGE = 64


def _quantize_minmax(x: np.ndarray, axis: int, levels: int = 15) -> np.ndarray:
    """Round x to `levels`+1 steps between its min and max along `axis` (f16 scale and min)."""
    lo = x.min(axis=axis, keepdims=True).astype(np.float16).astype(np.float32)
    scale = ((x.max(axis=axis, keepdims=True) - lo) / levels).astype(np.float16).astype(np.float32)
    q = np.floor(np.divide(x - lo, scale, out=np.zeros_like(x), where=scale > 0) + 0.5)
    return np.clip(q, 0, levels) * scale + lo


def _pages(x: np.ndarray, page: int = PAGE):
    for start in range(0, x.shape[0], page):
        yield slice(start, start + page)


def rot4_groups(x: np.ndarray, group: int) -> np.ndarray:
    y = rotate(x).astype(np.float32)
    g = y.reshape(*y.shape[:-1], -1, group)
    return unrotate(_quantize_minmax(g, axis=-1).reshape(y.shape)).astype(np.float32)


def kivi4(x: np.ndarray, rotated: bool = False, group: int = KIVI_GROUP) -> np.ndarray:
    """kernels' kivi4 K as stored (its numpy reference) over groups of `group` positions:
    every full group quantized, an unfinished last one kept as f16; optionally after the
    rotation."""
    y = rotate(x).astype(np.float32) if rotated else np.asarray(x, np.float32)
    out = y.astype(np.float16).astype(np.float32)
    for start in range(0, y.shape[0] - group + 1, group):
        rows = slice(start, start + group)
        out[rows] = reference_dequantize("kivi4", reference_quantize("kivi4", y[rows]))
    return unrotate(out).astype(np.float32) if rotated else out


def smooth_rot4(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    out = np.empty_like(x)
    for page in _pages(x):
        smooth = np.abs(x[page]).max(axis=0, keepdims=True).astype(np.float16).astype(np.float32)
        smooth = np.where(smooth > 0, smooth, 1.0)
        out[page] = reference_roundtrip("rot4", x[page] / smooth) * smooth
    return out


VARIANTS = {
    "rot4-g16": lambda x: rot4_groups(x, 16),
    "kivi4": kivi4,
    "kivi4-rot": lambda x: kivi4(x, rotated=True),
    "smooth-rot4": smooth_rot4,
    "kivi4-g64": lambda x: kivi4(x, group=64),
    "kivi4-g16": lambda x: kivi4(x, group=16),
}
BITS = {
    "rot4-g16": 6,
    "kivi4": 5,
    "kivi4-rot": 5,
    "smooth-rot4": 5.25,
    "kivi4-g64": 4.5,
    "kivi4-g16": 6,
}
