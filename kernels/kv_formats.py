"""KV cache formats: what is stored per token and head, and the numpy reference of each.

    f16    the row as float16.
    q8     int8 q = round(x / s), s = max|x| / 127 per token and head (f16).      8.1 bits/value
    rot4   y = R x, then per group of 32 values: q = round((y - mn) / s) in 0..15,
           s = (max - mn) / 15, s and mn stored as f16.                             5 bits/value
    rot2   (K only) the same with 2 bits, q in 0..3.                                3 bits/value
    kivi4  (K only) KIVI's key format: no rotation; per channel over a group of 32 positions
           (of a page; the page when pages are of 16): q = round((k - mn) / s) in 0..15,
           s = (max - mn) / 15 and mn per (group, head, channel) as f16,        5 bits/value
           stored even channels first, then odd (kivi_channel_order: the key tile's halves).
           A page is quantized only once its last position is written (it is "sealed"); until
           then its rows stay f16, K and V, in the sequence's open page (kv_kivi.py).

R is a fixed orthonormal rotation per head: R x = H (signs * x) / sqrt(D), H the Sylvester
Hadamard matrix (applied by the fast Walsh-Hadamard transform, D log D adds) and signs a fixed
random +-1 vector. Rotating spreads the few large channels of K and V over all of them, so
that 4 bits per value with one scale per group lose little (QuaRot, KIVI, TurboQuant). Since
R is orthonormal, q.k = (R q).(R k): attention rotates the query once and reads rotated keys
as they are; for V it sums rotated rows and rotates the result back once (R^T = R^-1).

Why kivi4: keys have a few channels far larger than the rest (and RoPE pairs them), so one
range per token (rot4's groups, even rotated) spends most codes on those channels; one range
per channel over a page of positions fits each channel's own spread (KIVI, Liu et al. 2024).
Attention dequantizes a sealed page's codes as two halves, the even and the odd channels
(kv_kivi.kivi_page_scores): with the scales and mins stored in that order, each half's scale
row is one contiguous run, loaded as the f16 pairs that its multiply-adds take.

K and V formats are independent (e.g. K q8 with V rot4). This module needs numpy only: the
engine's KV-quality tool uses `reference_roundtrip` to see what a format does to a cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernels.errors import UnsupportedTensor

KV_FORMATS = ("f16", "q8", "rot4", "rot2", "kivi4")
K_ONLY_FORMATS = ("rot2", "kivi4")
KIVI_GROUP = 32  # positions per kivi4 scale group: measured against 64 and 16 (hearth-engine.md)


def kivi_channel_order(head_dim: int) -> np.ndarray:
    """The channel each stored scale and min of a kivi4 group holds: the even channels, then
    the odd ones. `stored[..., kivi_channel_order(D).argsort()]` is the channels in order."""
    return np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])


def kivi_group(page_size: int) -> int:
    """Positions per kivi4 scale group in pages of page_size."""
    return min(KIVI_GROUP, page_size)


GROUP = 32  # values per scale group in rot4 / rot2
_LEVELS = {"rot4": 15, "rot2": 3}
_SIGN_SEED = 0x4EA27  # fixed: the signs are part of the stored format


@dataclass(frozen=True)
class KVCacheSpec:
    n_layers: int
    n_kv_heads: int
    head_dim: int
    k_format: str = "rot4"
    v_format: str = "rot4"
    page_size: int = 64
    max_tokens: int = 32768

    def __post_init__(self) -> None:
        for role, fmt in (("K", self.k_format), ("V", self.v_format)):
            check_format(fmt, self.head_dim, role)
        if self.page_size not in (16, 32, 64, 128):
            raise UnsupportedTensor(f"KV page size {self.page_size}: use 16, 32, 64 or 128")

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token takes in one layer, K and V together."""
        per_row = bytes_per_row(self.k_format, self.head_dim, self.page_size)
        per_row += bytes_per_row(self.v_format, self.head_dim, self.page_size)
        return per_row * self.n_kv_heads


def check_format(fmt: str, head_dim: int, role: str = "K") -> None:
    if fmt not in KV_FORMATS:
        raise UnsupportedTensor(f"KV cache format {fmt!r}: supported are {', '.join(KV_FORMATS)}")
    if fmt in K_ONLY_FORMATS and role != "K":
        raise UnsupportedTensor(f"KV cache format {fmt!r} is for K only; use rot4 or q8 for V")
    if head_dim & (head_dim - 1) or not 32 <= head_dim <= 256:
        raise UnsupportedTensor(
            f"head size {head_dim}: the KV kernels need a power of two from 32 to 256"
        )


def bytes_per_row(fmt: str, head_dim: int, page_size: int = 64) -> int:
    """Bytes of one row (a token and head) in format fmt, its share of scales included: kivi4's
    scale and min per group and channel are spread over the group's positions. (A kivi4 cache
    also holds one f16 page per sequence, the open one: PagedKVCache.open_page_bytes.)"""
    if fmt == "f16":
        return 2 * head_dim
    if fmt == "q8":
        return head_dim + 2
    if fmt == "kivi4":
        return head_dim // 2 + 4 * head_dim // kivi_group(page_size)
    bits = 4 if fmt == "rot4" else 2
    return head_dim * bits // 8 + 4 * (head_dim // GROUP)


def rotation_signs(head_dim: int) -> np.ndarray:
    rng = np.random.default_rng(_SIGN_SEED + head_dim)
    return np.where(rng.random(head_dim) < 0.5, -1.0, 1.0).astype(np.float32)


def hadamard(n: int) -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def rotate(x: np.ndarray) -> np.ndarray:
    """R x over the last axis (float64)."""
    d = x.shape[-1]
    return (np.asarray(x, np.float64) * rotation_signs(d)) @ hadamard(d) / np.sqrt(d)


def unrotate(y: np.ndarray) -> np.ndarray:
    """R^T y over the last axis (float64)."""
    d = y.shape[-1]
    return (np.asarray(y, np.float64) @ hadamard(d) / np.sqrt(d)) * rotation_signs(d)


def reference_quantize(fmt: str, x: np.ndarray) -> dict[str, np.ndarray]:
    """Rows x [..., D] -> the stored fields (codes unpacked, one per value). For kivi4, x is
    one scale group [G, ..., D] (axis 0 the positions): scale and min come out [1, ..., D]."""
    check_format(fmt, x.shape[-1], "K")
    x = np.asarray(x, np.float32)
    if fmt == "kivi4":
        # the kernel seals the page from its rows as stored while open: f16
        x = x.astype(np.float16).astype(np.float32)
        mn = x.min(axis=0, keepdims=True).astype(np.float16)
        scale = ((x.max(axis=0, keepdims=True) - mn.astype(np.float32)) / 15).astype(np.float16)
        s, m = scale.astype(np.float32), mn.astype(np.float32)
        q = np.floor(np.divide(x - m, s, out=np.zeros_like(x), where=s > 0) + 0.5)
        return {"q": np.clip(q, 0, 15).astype(np.uint8), "scale": scale, "min": mn}
    if fmt == "f16":
        return {"values": x.astype(np.float16)}
    if fmt == "q8":
        scale = (np.abs(x).max(axis=-1, keepdims=True) / 127).astype(np.float16)
        s = scale.astype(np.float32)
        q = np.floor(np.divide(x, s, out=np.zeros_like(x), where=s > 0) + 0.5)
        return {"q": np.clip(q, -127, 127).astype(np.int8), "scale": scale}
    levels = _LEVELS[fmt]
    y = rotate(x).astype(np.float32)
    groups = y.reshape(*y.shape[:-1], -1, GROUP)
    mn = groups.min(axis=-1, keepdims=True).astype(np.float16)
    scale = (groups.max(axis=-1, keepdims=True) - groups.min(axis=-1, keepdims=True)) / levels
    scale = scale.astype(np.float16)
    s, m = scale.astype(np.float32), mn.astype(np.float32)
    q = np.floor(np.divide(groups - m, s, out=np.zeros_like(groups), where=s > 0) + 0.5)
    return {"q": np.clip(q, 0, levels).astype(np.uint8), "scale": scale, "min": mn}


def reference_dequantize(fmt: str, packed: dict[str, np.ndarray]) -> np.ndarray:
    """The stored fields -> rows [..., D] as the cache returns them (float32, unrotated)."""
    if fmt == "f16":
        return packed["values"].astype(np.float32)
    if fmt == "q8":
        return packed["q"].astype(np.float32) * packed["scale"].astype(np.float32)
    if fmt == "kivi4":
        scale, mn = packed["scale"].astype(np.float32), packed["min"].astype(np.float32)
        return packed["q"].astype(np.float32) * scale + mn
    q = packed["q"].astype(np.float32)
    y = q * packed["scale"].astype(np.float32) + packed["min"].astype(np.float32)
    y = y.reshape(*y.shape[:-2], -1)
    return unrotate(y).astype(np.float32)


def reference_roundtrip(fmt: str, x: np.ndarray, page_size: int = 64) -> np.ndarray:
    """What attention sees of rows x [..., D] after storing them in format `fmt`. For kivi4, x
    is a sequence's rows from position 0 [T, ..., D] (page_size: the cache's): every page
    sealed but the open one, the page of the last position, whose rows attention reads as the
    f16 they were written as (KIVI's residual)."""
    if fmt != "kivi4":
        return reference_dequantize(fmt, reference_quantize(fmt, x))
    return reference_kivi_pages(x, page_size, n_sealed=(x.shape[0] - 1) // page_size)


def reference_kivi_pages(x: np.ndarray, page_size: int, n_sealed: int) -> np.ndarray:
    """Rows x [T, ..., D] from position 0 with their first n_sealed pages through kivi4 (in
    groups of kivi_group(page_size) positions) and the rest as f16."""
    out = np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
    group = kivi_group(page_size)
    for start in range(0, n_sealed * page_size, group):
        rows = slice(start, start + group)
        out[rows] = reference_dequantize("kivi4", reference_quantize("kivi4", x[rows]))
    return out
