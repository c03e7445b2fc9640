"""The Hearth forward pass written once more, as plainly as possible: the oracle for the tests.

No KV cache, no chunks, no ops seam: every weight is dequantized with the `gguf` package's numpy
dequantizers and the whole sequence is computed at once in float64, with the causal (and
sliding-window) mask spelled out and RoPE computed pair by pair from its definition (ggml's
rope: theta_i = p * freq_scale * base^(-2i/n_rot) / factor_i; "normal" rotates (x[2i], x[2i+1]),
"neox" rotates (x[i], x[i + n_rot/2])). It shares only ModelConfig with engine/hearth/forward.py,
so a mistake in the engine's cache, chunking, RoPE tables or GQA grouping shows up as a
difference here. Slow; for tiny models and short prompts.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.hearth.config import ModelConfig
from engine.hearth.ops import dequantize
from engine.hearth.weights import GGUFTensors


def reference_logits(config: ModelConfig, tensors: GGUFTensors, tokens: list[int]) -> np.ndarray:
    """Logits [len(tokens), vocab] of every position, in float64."""
    cfg = config

    def w(name: str) -> torch.Tensor:
        return torch.from_numpy(dequantize(tensors.matrix(name))).double()

    def vec(name: str) -> torch.Tensor | None:
        found = tensors.optional_vector(name)
        return None if found is None else found.double()

    def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.rms_eps) * weight

    n = len(tokens)
    h = w("token_embd.weight")[tokens] * cfg.embed_scale
    factors = vec("rope_freqs.weight")
    for i in range(cfg.n_layer):
        p = f"blk.{i}."
        swa = cfg.is_swa(i)
        x = rms_norm(h, vec(p + "attn_norm.weight"))
        q, k, v = (x @ w(p + f"attn_{name}.weight").T for name in "qkv")
        for name, t in (("q", q), ("k", k), ("v", v)):
            bias = vec(p + f"attn_{name}.bias")
            if bias is not None:
                t += bias
        q = q.view(n, cfg.n_head, cfg.head_dim)
        k = k.view(n, cfg.n_head_kv, cfg.head_dim)
        v = v.view(n, cfg.n_head_kv, cfg.head_dim)
        if cfg.qk_norm:
            q = rms_norm(q, vec(p + "attn_q_norm.weight"))
            k = rms_norm(k, vec(p + "attn_k_norm.weight"))
        base = cfg.rope.freq_base_swa if swa else cfg.rope.freq_base
        scale = cfg.rope.freq_scale_swa if swa else cfg.rope.freq_scale
        q = _rope(q, cfg, base, scale, factors)
        k = _rope(k, cfg, base, scale, factors)

        out = torch.zeros(n, cfg.n_head, cfg.head_dim, dtype=torch.float64)
        for head in range(cfg.n_head):
            kv = head // cfg.n_rep  # query heads are grouped consecutively per KV head
            scores = q[:, head] @ k[:, kv].T * cfg.attn_scale
            for a in range(n):
                for b in range(n):
                    if b > a or (swa and a - b >= cfg.swa_window):
                        scores[a, b] = -math.inf
            out[:, head] = torch.softmax(scores, dim=-1) @ v[:, kv]
        attn = out.reshape(n, -1) @ w(p + "attn_output.weight").T
        bias = vec(p + "attn_output.bias")
        if bias is not None:
            attn += bias
        if cfg.post_norms:
            attn = rms_norm(attn, vec(p + "post_attention_norm.weight"))
        h = h + attn

        x = rms_norm(h, vec(p + "ffn_norm.weight"))
        gate = x @ w(p + "ffn_gate.weight").T
        if cfg.activation == "silu":
            gate = gate / (1 + torch.exp(-gate))
        else:  # ggml_gelu: the tanh form
            gate = (
                0.5 * gate * (1 + torch.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3)))
            )
        ffn = (gate * (x @ w(p + "ffn_up.weight").T)) @ w(p + "ffn_down.weight").T
        if cfg.post_norms:
            ffn = rms_norm(ffn, vec(p + "post_ffw_norm.weight"))
        h = h + ffn

    h = rms_norm(h, vec("output_norm.weight"))
    out_name = "output.weight" if "output.weight" in tensors else "token_embd.weight"
    logits = h @ w(out_name).T
    if cfg.final_softcap:
        logits = torch.tanh(logits / cfg.final_softcap) * cfg.final_softcap
    return logits.numpy()


def _rope(x: torch.Tensor, cfg: ModelConfig, base: float, scale: float, factors) -> torch.Tensor:
    n_rot = cfg.rope.n_rot
    out = x.clone()
    for pos in range(x.shape[0]):
        for i in range(n_rot // 2):
            theta = pos * scale * base ** (-2 * i / n_rot)
            if factors is not None:
                theta /= float(factors[i])
            c = math.cos(theta) * cfg.rope.attn_factor
            s = math.sin(theta) * cfg.rope.attn_factor
            a, b = (2 * i, 2 * i + 1) if cfg.rope.layout == "normal" else (i, i + n_rot // 2)
            x0, x1 = x[pos, :, a], x[pos, :, b]
            out[pos, :, a] = x0 * c - x1 * s
            out[pos, :, b] = x0 * s + x1 * c
    return out
