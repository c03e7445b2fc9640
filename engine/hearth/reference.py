"""The Hearth forward pass written once more, as plainly as possible: the oracle for the tests.

No KV cache, no chunks, no ops seam: every weight is dequantized with the `gguf` package's numpy
dequantizers and the whole sequence is computed at once in float64, with the causal (and
sliding-window) mask spelled out and RoPE computed pair by pair from its definition (ggml's
rope: theta_i = p * freq_scale * base^(-2i/n_rot) / factor_i; "normal" rotates (x[2i], x[2i+1]),
"neox" rotates (x[i], x[i + n_rot/2]); YaRN's ramp per pair), attention sinks as one more
logit in each head's softmax, and mixture-of-experts layers token by token: the router's
logits, the architecture's choice of experts and weights, each chosen expert's SwiGLU (or
gpt-oss's clamped one) on the whole dequantized expert tensor, the shared expert. It shares only
ModelConfig with engine/hearth/forward.py (none of ops.py, routing.py, kernels/), so a mistake
in the engine's cache, chunking, RoPE tables, GQA grouping, routing or expert dequantization
shows up as a difference here. Slow; for tiny models and short prompts.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.hearth.config import SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT, ModelConfig
from engine.hearth.weights import GGUFTensors


def _dequantize(data: np.ndarray, ggml_type: int, cols: int) -> np.ndarray:
    """Rows of blocks (or floats) as float64 [rows, cols], by gguf's numpy dequantizers."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    if data.dtype != np.uint8:
        return data.astype(np.float64).reshape(-1, cols)
    return dequantize(data, GGMLQuantizationType(ggml_type)).astype(np.float64).reshape(-1, cols)


def reference_logits(config: ModelConfig, tensors: GGUFTensors, tokens: list[int]) -> np.ndarray:
    """Logits [len(tokens), vocab] of every position, in float64."""
    cfg = config

    def w(name: str) -> torch.Tensor:
        m = tensors.matrix(name)
        return torch.from_numpy(_dequantize(_numpy(m.data), m.ggml_type, m.cols))

    def experts(name: str) -> torch.Tensor:  # [n_expert, rows, cols]
        e = tensors.experts(name)
        flat = _numpy(e.data).reshape(e.n_expert * e.rows, -1)
        return torch.from_numpy(_dequantize(flat, e.ggml_type, e.cols)).view(e.n_expert, e.rows, -1)

    def tensor(name: str) -> torch.Tensor | None:
        found = tensors.optional_float_tensor(name)
        return None if found is None else found.double()

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
        sinks = vec(p + "attn_sinks.weight") if cfg.attn_sinks else None
        for head in range(cfg.n_head):
            kv = head // cfg.n_rep  # query heads are grouped consecutively per KV head
            scores = q[:, head] @ k[:, kv].T * cfg.attn_scale
            for a in range(n):
                for b in range(n):
                    if b > a or (swa and a - b >= cfg.swa_window):
                        scores[a, b] = -math.inf
            exp = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
            denominator = exp.sum(dim=-1, keepdim=True)
            if sinks is not None:  # exp(sink) joins the denominator, with the same shift
                shift = scores.max(dim=-1, keepdim=True).values
                denominator = denominator + torch.exp(sinks[head] - shift)
            out[:, head] = (exp / denominator) @ v[:, kv]
        attn = out.reshape(n, -1) @ w(p + "attn_output.weight").T
        bias = vec(p + "attn_output.bias")
        if bias is not None:
            attn += bias
        if cfg.post_norms:
            attn = rms_norm(attn, vec(p + "post_attention_norm.weight"))
        h = h + attn

        x = rms_norm(h, vec(p + cfg.ffn_norm_tensor))
        if cfg.moe is None:
            ffn = _gated(
                x @ w(p + "ffn_gate.weight").T, x @ w(p + "ffn_up.weight").T, cfg.activation
            )
            ffn = ffn @ w(p + "ffn_down.weight").T
        else:
            ffn = _experts(cfg, p, x, w, vec, experts, tensor)
        if cfg.post_norms:
            ffn = rms_norm(ffn, vec(p + "post_ffw_norm.weight"))
        h = h + ffn

    h = rms_norm(h, vec("output_norm.weight"))
    out_name = "output.weight" if "output.weight" in tensors else "token_embd.weight"
    logits = h @ w(out_name).T
    if cfg.final_softcap:
        logits = torch.tanh(logits / cfg.final_softcap) * cfg.final_softcap
    return logits.numpy()


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy() if t.dtype != torch.bfloat16 else t.float().cpu().numpy()


def _gated(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    """The gated feed-forward's activation, from each function's definition."""
    if activation == "silu":
        return gate / (1 + torch.exp(-gate)) * up
    if activation == "swiglu_oai":  # ggml_swiglu_oai
        g = torch.minimum(gate, torch.tensor(SWIGLU_OAI_LIMIT, dtype=gate.dtype))
        u = torch.clamp(up, -SWIGLU_OAI_LIMIT, SWIGLU_OAI_LIMIT)
        return g / (1 + torch.exp(-SWIGLU_OAI_ALPHA * g)) * (u + 1)
    # ggml_gelu: the tanh form
    c = math.sqrt(2 / math.pi)
    return 0.5 * gate * (1 + torch.tanh(c * (gate + 0.044715 * gate**3))) * up


def _experts(cfg: ModelConfig, p: str, x: torch.Tensor, w, vec, experts, tensor) -> torch.Tensor:
    """A mixture-of-experts feed-forward, one token at a time (build_moe_ffn's definition)."""
    moe = cfg.moe
    router = w(p + "ffn_gate_inp.weight")
    router_bias = vec(p + "ffn_gate_inp.bias")
    gate, up, down = (experts(f"{p}ffn_{kind}_exps.weight") for kind in ("gate", "up", "down"))
    biases = [tensor(f"{p}ffn_{kind}_exps.bias") for kind in ("gate", "up", "down")]
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        logits = router @ x[t]
        if router_bias is not None:
            logits = logits + router_bias
        if moe.gating == "softmax":
            probs = torch.exp(logits - logits.max())
            probs = probs / probs.sum()
            chosen = sorted(range(moe.n_expert), key=lambda e: -float(probs[e]))[
                : moe.n_expert_used
            ]
            weights = [float(probs[e]) for e in chosen]
        else:  # "topk_softmax": softmax over the chosen logits only
            chosen = sorted(range(moe.n_expert), key=lambda e: -float(logits[e]))[
                : moe.n_expert_used
            ]
            top = [float(logits[e]) for e in chosen]
            exps = [math.exp(v - max(top)) for v in top]
            weights = [v / sum(exps) for v in exps]
        if moe.normalize:
            total = max(sum(weights), 2.0**-14)
            weights = [v / total for v in weights]
        for e, weight in zip(chosen, weights, strict=True):
            g, u = gate[e] @ x[t], up[e] @ x[t]
            if biases[0] is not None:
                g, u = g + biases[0][e], u + biases[1][e]
            y = down[e] @ _gated(g, u, cfg.activation)
            if biases[2] is not None:
                y = y + biases[2][e]
            out[t] += weight * y
    if moe.n_ff_shexp:
        shared = _gated(
            x @ w(p + "ffn_gate_shexp.weight").T, x @ w(p + "ffn_up_shexp.weight").T, "silu"
        )
        shared = shared @ w(p + "ffn_down_shexp.weight").T
        if moe.shared_gate:
            shared = shared / (1 + torch.exp(-(x @ vec(p + "ffn_gate_inp_shexp.weight"))))[:, None]
        out = out + shared
    return out


def _yarn_ramp(cfg: ModelConfig, base: float, pair: int) -> float:
    """YaRN's share of the unscaled frequency for a dimension pair (ggml's rope_yarn_ramp over
    ggml_rope_yarn_corr_dims), 0 without YaRN."""
    yarn = cfg.rope.yarn
    if yarn is None:
        return 0.0
    n_rot = cfg.rope.n_rot

    def corr_dim(turns: float) -> float:
        return n_rot * math.log(yarn.n_ctx_orig / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(0.0, math.floor(corr_dim(yarn.beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr_dim(yarn.beta_slow)))
    y = (pair - low) / max(0.001, high - low)
    return 1 - min(1.0, max(0.0, y))


def _rope(x: torch.Tensor, cfg: ModelConfig, base: float, scale: float, factors) -> torch.Tensor:
    n_rot = cfg.rope.n_rot
    out = x.clone()
    for pos in range(x.shape[0]):
        for i in range(n_rot // 2):
            theta_extrap = pos * base ** (-2 * i / n_rot)
            if factors is not None:
                theta_extrap /= float(factors[i])
            ramp = _yarn_ramp(cfg, base, i)
            theta = scale * theta_extrap * (1 - ramp) + theta_extrap * ramp
            c = math.cos(theta) * cfg.rope.attn_factor
            s = math.sin(theta) * cfg.rope.attn_factor
            a, b = (2 * i, 2 * i + 1) if cfg.rope.layout == "normal" else (i, i + n_rot // 2)
            x0, x1 = x[pos, :, a], x[pos, :, b]
            out[pos, :, a] = x0 * c - x1 * s
            out[pos, :, b] = x0 * s + x1 * c
    return out
