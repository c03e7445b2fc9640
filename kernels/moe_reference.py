"""Reference for the mixture-of-experts GEMV (kernels/moe_gemv.py), in numpy and float64, needing
neither torch nor triton; the tests and the benchmark use it and nothing else.

An expert tensor is stored in GGUF as [n_expert, n_out, n_in] (ffn_gate_exps, ffn_up_exps,
ffn_down_exps; ne = [n_in, n_out, n_expert]): expert e's matrix is rows e n_out .. (e + 1) n_out
- 1 of the [n_expert n_out, n_in] matrix of the same bytes. Its blocks are dequantized by the
`gguf` package (kernels.reference.dequantize_weight), then multiplied in float64:

    rows:      y[t, s] = W[ids[t, s]] @ x[t] (+ b[ids[t, s]])
    gate/up:   h[t, s] = act(Wg[e] @ x[t] + bg[e], Wu[e] @ x[t] + bu[e]),  e = ids[t, s]
               silu:        g / (1 + exp(-g)) * u
               swiglu_oai:  g' / (1 + exp(-alpha g')) * (u' + 1), g' = min(g, limit),
                            u' = clamp(u, -limit, limit)  (gpt-oss; ggml's swiglu_oai)
    down:      out[t] = sum_s weights[t, s] (Wd[e] @ h[t, s] + bd[e])
"""

from __future__ import annotations

import numpy as np

from kernels.ggml_formats import block_format
from kernels.reference import dequantize_weight, random_weight_bytes, swiglu

# gpt-oss's clamped SwiGLU (llama.cpp: LLM_FFN_SWIGLU_OAI_MOE)
OAI_ALPHA = 1.702
OAI_LIMIT = 7.0


def random_expert_bytes(fmt: str, n_expert: int, n_out: int, n_in: int, seed: int = 0):
    """A valid [n_expert, n_out, n_in] tensor of random blocks. MXFP4's exponent byte is drawn
    from 2^-9 .. 2^-3 scales (a random byte would often scale by 2^100)."""
    raw = random_weight_bytes(fmt, n_expert * n_out, n_in, seed)
    if fmt == "MXFP4":
        blocks = raw.reshape(-1, 17)
        rng = np.random.default_rng(seed + 1)
        blocks[:, 0] = rng.integers(119, 126, size=blocks.shape[0], dtype=np.uint8)
    return raw


def dequantize_experts(raw: np.ndarray, fmt: str, shape: tuple[int, int, int],
                       experts=None):  # fmt: skip
    """float64 [n_expert, n_out, n_in] through gguf's dequantizer; or, given `experts`, a dict
    of only those experts' [n_out, n_in] matrices (the real shapes' tensors are 100+ MB)."""
    n_expert, n_out, n_in = shape
    if experts is None:
        flat = dequantize_weight(raw, fmt, (n_expert * n_out, n_in))
        return flat.reshape(shape).astype(np.float64)
    fmt_info = block_format(fmt)
    per_expert = n_out * n_in // fmt_info.block_size * fmt_info.type_size
    data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    return {
        int(e): dequantize_weight(
            data[int(e) * per_expert : (int(e) + 1) * per_expert], fmt, (n_out, n_in)
        ).astype(np.float64)
        for e in np.unique(np.asarray(experts))
    }


def expert_rows(x, w, ids, bias=None) -> np.ndarray:
    """x [T, K] (or [T, k, K]: one input per pair), w float64 [E, N, K] (or dequantize_experts'
    dict), ids [T, k] -> [T, k, N]."""
    x = np.asarray(x, dtype=np.float64)
    ids = np.asarray(ids)
    t, k = ids.shape
    out = np.empty((t, k, w[int(ids[0, 0])].shape[0]))
    for i in range(t):
        for s in range(k):
            e = int(ids[i, s])
            xi = x[i, s] if x.ndim == 3 else x[i]
            out[i, s] = w[e] @ xi + (0.0 if bias is None else np.asarray(bias, np.float64)[e])
    return out


def swiglu_oai(gate, up, alpha: float = OAI_ALPHA, limit: float = OAI_LIMIT) -> np.ndarray:
    g = np.minimum(np.asarray(gate, dtype=np.float64), limit)
    u = np.clip(np.asarray(up, dtype=np.float64), -limit, limit)
    return g / (1.0 + np.exp(-alpha * g)) * (u + 1.0)


def gate_up(x, w_gate, w_up, ids, kind="silu", bias_gate=None, bias_up=None, alpha=OAI_ALPHA,
            limit=OAI_LIMIT) -> np.ndarray:  # fmt: skip
    """[T, k, F]: the activation of each pair's gate and up projections."""
    g = expert_rows(x, w_gate, ids, bias_gate)
    u = expert_rows(x, w_up, ids, bias_up)
    if kind == "silu":
        return swiglu(g, u)
    return swiglu_oai(g, u, alpha, limit)


def down(h, w_down, ids, weights, bias=None) -> np.ndarray:
    """h [T, k, F] -> [T, N]: each pair's down projection, summed with the routing weights."""
    y = expert_rows(h, w_down, ids, bias)
    return np.einsum("tk,tkn->tn", np.asarray(weights, dtype=np.float64), y)


def aligned_pairs(ids, n_expert: int, block_m: int):
    """The grouped GEMM's routing (kernels/moe_grouped_gemm.align_pairs): ids [T, k] ->
    (count [E], block_end [E], slots: {slot: pair}) where expert e's pairs, in pair order, take
    blocks of block_m slots after those of experts below e (the padding slots absent)."""
    flat = np.asarray(ids).reshape(-1)
    count = np.bincount(flat, minlength=n_expert)[:n_expert]
    blocks = -(-count // block_m)
    block_end = np.cumsum(blocks)
    slots = {}
    for e in range(n_expert):
        first = (block_end[e] - blocks[e]) * block_m
        for j, pair in enumerate(np.flatnonzero(flat == e)):
            slots[int(first + j)] = int(pair)
    return count, block_end, slots


def moe(x, w_gate, w_up, w_down, ids, weights, kind="silu", biases=(None, None, None)):
    """[T, N]: a chunk's experts' feed-forward, gate_up then down."""
    h = gate_up(x, w_gate, w_up, ids, kind, biases[0], biases[1])
    return down(h, w_down, ids, weights, biases[2])
