"""Reference implementations, written once, in numpy (float64 where it matters), used by the
tests and the benchmarks and needing neither torch nor triton. The block formats' oracle is
the `gguf` package's own dequantizer (gguf.quants.dequantize); the KV cache formats' (what a
write stores, what the gather and attention read back) is kernels.kv_formats.reference_roundtrip."""

from __future__ import annotations

import numpy as np

from kernels.ggml_formats import block_format


def dequantize_weight(raw: np.ndarray, ggml_type: object, shape: tuple[int, int]) -> np.ndarray:
    """float32 [n_out, n_in] from the tensor's bytes as stored in the GGUF file."""
    import gguf

    fmt = block_format(ggml_type)
    data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if fmt.name == "F32":
        values = data.view(np.float32)
    elif fmt.name == "BF16":  # gguf's BF16 dequantizer needs a row shape; this is the same
        values = (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        qtype = gguf.GGMLQuantizationType(fmt.ggml_type)
        values = gguf.quants.dequantize(data.reshape(shape[0], -1), qtype)
    return np.asarray(values, dtype=np.float32).reshape(shape)


def gemv(x: np.ndarray, raw: np.ndarray, ggml_type: object, shape: tuple[int, int]) -> np.ndarray:
    """x [..., n_in] @ W.T in float64."""
    w = dequantize_weight(raw, ggml_type, shape).astype(np.float64)
    return np.asarray(x, dtype=np.float64) @ w.T


def quantize_activation(x: np.ndarray) -> np.ndarray:
    """x' = d q as the integer GEMV sees x (kernels/act_quant.py): per 32 values d = max|x| / 127
    and q = round(x / d); x [..., K] (K a multiple of 32) -> float64."""
    x = np.asarray(x, dtype=np.float32)
    groups = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(groups).max(axis=-1, keepdims=True)
    q = np.rint(groups * (np.float32(127.0) / np.maximum(amax, np.float32(1e-30))))
    d = amax * np.float32(1.0 / 127.0)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    gate = np.asarray(gate, dtype=np.float64)
    return gate / (1.0 + np.exp(-gate)) * up


def rope(
    x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray, n_rot: int, neox: bool,
    mscale: float = 1.0,
) -> np.ndarray:  # fmt: skip
    """x [T, H, D]: rotate the first n_rot dims of each head by pos * inv_freq[i].

    normal (GPT-J / llama in ggml): pairs (2i, 2i+1); NeoX: pairs (i, i + n_rot/2).
    """
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [T, n_rot/2]
    cos = (np.cos(angle) * mscale)[:, None, :]
    sin = (np.sin(angle) * mscale)[:, None, :]
    half = n_rot // 2
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:n_rot] = a * sin + b * cos
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos - b * sin
        out[..., 1:n_rot:2] = a * sin + b * cos
    return out


def decode_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """One query per head over T positions. q [Hq, D], k and v [T, Hkv, D] -> [Hq, D];
    query head h reads KV head h // (Hq / Hkv) (grouped-query attention)."""
    q = np.asarray(q, dtype=np.float64)
    group = q.shape[0] // k.shape[1]
    k = np.repeat(np.asarray(k, dtype=np.float64), group, axis=1)  # [T, Hq, D]
    v = np.repeat(np.asarray(v, dtype=np.float64), group, axis=1)
    scores = np.einsum("hd,thd->ht", q, k) * scale
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=1, keepdims=True)
    return np.einsum("ht,thd->hd", p, v)


def random_weight_bytes(fmt_name: str, n_out: int, n_in: int, seed: int = 0) -> np.ndarray:
    """A valid tensor of random blocks: random quant bytes, small finite random scales (random
    bytes in a 16-bit scale field would often be inf or NaN)."""
    fmt = block_format(fmt_name)
    rng = np.random.default_rng(seed)
    blocks = n_in // fmt.block_size
    raw = rng.integers(0, 256, size=(n_out, blocks, fmt.type_size), dtype=np.uint8)
    for _name, offset, length, dtype in fmt.fields:
        field = rng.standard_normal((n_out, blocks, 1)).astype(np.float32)
        if dtype == "float16":
            raw[:, :, offset : offset + length] = (field * 0.01).astype(np.float16).view(np.uint8)
        elif dtype == "bfloat16":
            raw[:, :, offset : offset + length] = (
                (field.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
            )
        elif dtype == "float32":
            raw[:, :, offset : offset + length] = field.view(np.uint8)
    return raw.reshape(-1)


def k_quant_f16_weights(raw: np.ndarray, fmt_name: str, shape: tuple[int, int]) -> np.ndarray:
    """A Q4_K or Q6_K tensor's weights as kernels/dequant_mma.py forms them, float64 [n_out,
    n_in]: each sub-block's scale s = d sc and Q4_K's offset -dmin m rounded to f16, then each
    weight q s - dmin m (Q4_K) or (q - 32) s (Q6_K) rounded once to f16 (gguf's values but for
    these three f16 roundings; ggml's layouts as kernels/dequant.py describes them)."""
    n_out, n_in = shape
    nb = n_in // 256
    data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)

    def f16(v: np.ndarray) -> np.ndarray:
        return v.astype(np.float16).astype(np.float64)

    if fmt_name == "Q4_K":
        blocks = data.reshape(n_out, nb, 144)
        d = blocks[..., 0:2].copy().view(np.float16).astype(np.float64)  # [n_out, nb, 1]
        dmin = blocks[..., 2:4].copy().view(np.float16).astype(np.float64)
        q = blocks[..., 4:16].astype(np.int64)
        qs = blocks[..., 16:144].astype(np.int64)
        low, high = q[..., 0:4], q[..., 4:8]  # get_scale_min_k4: j < 4, then j >= 4
        sc = np.concatenate([low & 63, (q[..., 8:12] & 15) | ((low >> 6) << 4)], axis=-1)
        mn = np.concatenate([high & 63, (q[..., 8:12] >> 4) | ((high >> 6) << 4)], axis=-1)
        s, offset = f16(d * sc), f16(-dmin * mn)  # [n_out, nb, 8]
        chunks = qs.reshape(n_out, nb, 4, 32)
        codes = np.stack([chunks & 15, chunks >> 4], axis=3).reshape(n_out, nb, 8, 32)
        w = f16(codes * s[..., None] + offset[..., None])
    elif fmt_name == "Q6_K":
        blocks = data.reshape(n_out, nb, 210)
        ql = blocks[..., 0:128].astype(np.int64).reshape(n_out, nb, 2, 2, 32)  # h, q % 2, l
        qh = blocks[..., 128:192].astype(np.int64).reshape(n_out, nb, 2, 1, 32)  # h, l
        scales = blocks[..., 192:208].copy().view(np.int8).astype(np.int64)
        d = blocks[..., 208:210].copy().view(np.float16).astype(np.float64)
        quarter = np.arange(4).reshape(1, 1, 1, 4, 1)
        nibbles = np.concatenate([ql & 15, ql >> 4], axis=3)  # quarters 0, 1, 2, 3
        codes = nibbles | (((qh >> (2 * quarter)) & 3) << 4)  # [n_out, nb, 2, 4, 32]
        s = f16(d * scales).reshape(n_out, nb, 2, 4, 2)  # 8h + 2q + l // 16
        w = f16((codes - 32).reshape(n_out, nb, 2, 4, 2, 16) * s[..., None])
    else:
        raise ValueError(f"{fmt_name}: Q4_K or Q6_K")
    return w.reshape(n_out, n_in)
