"""A decoder layer's attention block, for engine/hearth/forward.py's Transformer: Q, K and V
out of the joined GEMV, their K/V rows written (biases, head norms and RoPE in the write's
launch where the cache has one), the attention over the cache, then wo.

`layer` below is forward.py's Layer (its Q/K/V projections, biases, head norms), read by
attribute: this module does not import forward.py, which imports it.

A decode step on kernels' paged cache writes its row inside the attention's own launch
(`ops.write_and_attend`: kernels/decode_attention.py's WRITE), a launch a layer fewer, where
`writes_in_attention` allows it; otherwise `_rotate_and_write` writes (one launch with RoPE, or
RoPE's and the cache's) and the cache attends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from engine.hearth.config import ModelConfig
    from engine.hearth.ops import TorchOps


def attention(model, layer, i: int, x, shared, positions, cache, n_keys: int, swa: bool,
              rope, masks: dict) -> torch.Tensor:  # fmt: skip
    """Layer i's attention block on x [T, n_embd] (the normed input; `shared`: what its
    matrices share of it): Q, K and V, their K/V rows written, the attention over the cache,
    wo (and Gemma 3's post-attention norm). `rope`: (angles, table) of the layer's RoPE."""
    a, out8 = attend(model, layer, i, x, shared, positions, cache, n_keys, swa, rope, masks)
    a = model.ops.matmul(a, layer.wo, out8)
    if layer.post_attn_norm is not None:  # else the caller's norm adds the bias (bo)
        a = model.ops.rms_norm(add_bias(a, layer.bo), layer.post_attn_norm, model.config.rms_eps)
    return a


def attend(model, layer, i: int, x, shared, positions, cache, n_keys: int, swa: bool, rope,
           masks: dict) -> tuple[torch.Tensor, object | None]:  # fmt: skip
    """`attention` up to wo: (the attention's output [T, n_head head_dim], its 8-bit form for
    wo's GEMV or None)."""
    cfg, ops = model.config, model.ops
    n_tokens = x.shape[0]
    y = project(ops, x, layer.attn_in, shared)
    window = cfg.swa_window if swa else 0
    options = {"scale": cfg.attn_scale, "window": window, "masks": masks}
    if layer.attn_sinks is not None:  # only then: a cache need not know sinks otherwise
        options["sinks"] = layer.attn_sinks
    # a decode step's attention output in 8 bits from the attention's own launch, where
    # the cache can write it and wo's GEMV reads it (no quantization launch before wo)
    out8 = None
    if getattr(cache, "fills_quantized", False):
        out8 = ops.empty_shared([layer.wo], n_tokens)
        if out8 is not None:
            options["quantized"] = out8
    a = _write_and_attend(model, layer, i, y, cache, rope, options) if n_tokens == 1 else None
    if a is None:
        q = _rotate_and_write(model, layer, i, y, n_tokens, positions, cache, rope)
        a = cache.attend(i, q, positions, n_keys, **options)
    return a.reshape(n_tokens, -1), out8


def _write_and_attend(model, layer, i, y, cache, rope, options) -> torch.Tensor | None:
    """A decode step's write (biases, RoPE, K and V stored) and attention in the attention's
    one launch (ops.write_and_attend), where the ops and cache have it and
    `writes_in_attention` allows it; None otherwise."""
    cfg = model.config
    if not writes_in_attention(layer, cfg):
        return None
    n_q, n_kv, hd = cfg.n_head, cfg.n_head_kv, cfg.head_dim
    angles, table = rope
    return model.ops.write_and_attend(
        cache, i, angles, table, y["q"].view(1, n_q, hd), y["k"].view(1, n_kv, hd),
        y["v"].view(1, n_kv, hd), (layer.bq, layer.bk, layer.bv), options,
    )  # fmt: skip


def _rotate_and_write(model, layer, i, y, n_tokens, positions, cache, rope) -> torch.Tensor:
    """Q, K and V out of the GEMV (y, by part): biases added, Q's and K's heads normed and
    rotated, K and V written to the cache; returns the rotated queries. One launch where the
    cache writes with RoPE (ops.write_rotating), else RoPE's launch (Q, K and V side by side
    where one matrix made them) and the cache's write."""
    cfg, ops = model.config, model.ops
    angles, table = rope
    n_q, n_kv, hd = cfg.n_head, cfg.n_head_kv, cfg.head_dim
    norms = (layer.q_norm, layer.k_norm) if layer.q_norm is not None else None
    if (layer.q_norm is None) == (layer.k_norm is None):
        q = ops.write_rotating(
            cache, i, angles, table, y["q"].view(n_tokens, n_q, hd),
            y["k"].view(n_tokens, n_kv, hd), y["v"].view(n_tokens, n_kv, hd),
            (layer.bq, layer.bk, layer.bv), norms, cfg.rms_eps,
        )  # fmt: skip
        if q is not None:
            return q
    joined = joined_heads(layer)
    if joined:  # Q, K (and V) side by side in one output: bias, norms, RoPE in one launch
        heads = y[joined].view(n_tokens, -1, hd)
        qkv = ops.rope_heads(
            heads, angles, table, n_q, n_kv, bias=layer.joined_bias, norms=norms,
            eps=cfg.rms_eps,
        )  # fmt: skip
        q, k, v_heads = qkv[:, :n_q], qkv[:, n_q : n_q + n_kv], qkv[:, n_q + n_kv :]
    else:
        q = add_bias(y["q"], layer.bq).view(n_tokens, n_q, hd)
        k = add_bias(y["k"], layer.bk).view(n_tokens, n_kv, hd)
        if layer.q_norm is not None:
            q = ops.rms_norm(q, layer.q_norm, cfg.rms_eps)
            k = ops.rms_norm(k, layer.k_norm, cfg.rms_eps)
        q = ops.rope(q, angles, table)
        k = ops.rope(k, angles, table)
    v = v_heads if joined == "qkv" else add_bias(y["v"], layer.bv).view(n_tokens, n_kv, hd)
    cache.write(i, positions, k, v)
    return q


# the most query heads a KV head may have for a step to write in the attention's launch
WRITE_IN_ATTENTION_MAX_GROUP = 4


def writes_in_attention(layer, config: ModelConfig) -> bool:
    """Whether a decode step writes its K/V row in the attention's launch: where that was
    measured faster than the write's own launch before it (H200, graph replays of a step,
    docs/decisions/2026-11-30-kv-write-in-the-attention.md): no head norms and at most
    WRITE_IN_ATTENTION_MAX_GROUP query heads a KV head (Llama-3-8B, 4: 2.020-2.021 ms against
    2.050-2.051). Qwen3-30B-A3B (head norms, 8) lost, 2.058 against 2.022-2.026, and
    gpt-oss-20b (8) too, 1.788 against 1.780: each program rotates its group's queries
    before it reads a page."""
    if layer.q_norm is not None or layer.k_norm is not None:
        return False
    return config.n_head <= WRITE_IN_ATTENTION_MAX_GROUP * config.n_head_kv


def joined_heads(layer) -> str:
    """The heads one launch takes: "qkv" where Q, K and V come out of one matrix, "qk" where
    Q and K do (V apart), else none. That launch adds their biases, norms Q's and K's heads
    and rotates them (V's heads pass through it only for a bias: without one, V stays the
    GEMV's output)."""
    first = layer.attn_in[0]
    if first.parts[:2] != ("q", "k") or (layer.q_norm is None) != (layer.k_norm is None):
        return ""
    if (layer.bq is None) != (layer.bk is None):
        return ""
    if first.parts == ("q", "k", "v") and layer.bv is not None and layer.bq is not None:
        return "qkv"
    return "qk" if layer.bv is None or first.parts == ("q", "k") else ""


def project(ops: TorchOps, x: torch.Tensor, projections: list, shared) -> dict:
    """Each part's output [T, size] (views into a joined product) of `projections` (forward.py's
    Projection: a matrix and its parts); "qk" too when Q and K are the first two parts of one
    product. `shared`: what the matrices share of x (from the ops' *_for call that made x)."""
    out = {}
    for p in projections:
        y = ops.matmul(x, p.weight, shared)
        if len(p.parts) == 1:
            out[p.parts[0]] = y
            continue
        for name, part in zip(p.parts, y.split(p.sizes, dim=-1), strict=True):
            out[name] = part
        if p.parts[:2] == ("q", "k"):
            out["qk"] = y[:, : p.sizes[0] + p.sizes[1]]
        if p.parts == ("q", "k", "v"):
            out["qkv"] = y
    return out


def add_bias(y: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """y + bias in y's own dtype, in place (y is a fresh product, or a part of one that nothing
    else reads): one launch, the sum in float32 where the bias is and rounded once. `y + bias`
    would promote an f16 y to the float32 bias's dtype, and everything after it with it (in
    each later layer, Q, K, V and the attention output converted back and forth)."""
    return y if bias is None else y.add_(bias)
