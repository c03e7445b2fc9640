"""The Hearth forward pass: llama, qwen2, qwen3 and gemma3 decoders over a KV cache.

    model = Transformer.load(config, tensors, ops)
    logits = model.forward(tokens, positions, cache, n_keys=...)   # [vocab] of the last token

One layer, as llama.cpp builds it (models/llama.cpp, qwen2.cpp, qwen3.cpp, gemma3.cpp; the
differences are switched by ModelConfig, see engine/hearth/config.py):

    x  = rms_norm(h) ; q, k, v = x Wq (+bq), x Wk (+bk), x Wv (+bv)
    q, k = rms_norm per head (qwen3, gemma3) ; rope(q), rope(k)   ; cache <- k, v
    a  = attention(q, cache) Wo ; a = rms_norm(a) (gemma3) ; h = h + a
    x  = rms_norm(h) ; f = (act(x Wgate) * x Wup) Wdown ; f = rms_norm(f) (gemma3) ; h = h + f

then logits = rms_norm(h) Wout, soft-capped for gemma3 when the file says so. The embedding is
scaled by sqrt(n_embd) for gemma3. Only the rows whose logits are asked for go through the
output matrix (a 262k-entry vocabulary makes that the largest matrix of a small model).

Everything the step needs is a tensor argument (tokens, positions) or preallocated (the cache),
so on a GPU one decode step can be captured in a CUDA graph; `n_keys` is the only Python number
that varies, and a decode step passes the cache's full length to keep it fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.hearth.config import ModelConfig
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import PreparedWeight, TorchOps, inverse_frequencies, rope_angles
from engine.hearth.weights import GGUFTensors, QuantWeight


@dataclass
class Layer:
    attn_norm: torch.Tensor
    wq: PreparedWeight
    wk: PreparedWeight
    wv: PreparedWeight
    wo: PreparedWeight
    ffn_norm: torch.Tensor
    w_gate: PreparedWeight
    w_up: PreparedWeight
    w_down: PreparedWeight
    bq: torch.Tensor | None = None
    bk: torch.Tensor | None = None
    bv: torch.Tensor | None = None
    bo: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    post_attn_norm: torch.Tensor | None = None
    post_ffn_norm: torch.Tensor | None = None


class Transformer:
    def __init__(
        self,
        config: ModelConfig,
        ops: TorchOps,
        embedding: QuantWeight,
        layers: list[Layer],
        output_norm: torch.Tensor,
        output: PreparedWeight,
        inv_freq: torch.Tensor,
        inv_freq_swa: torch.Tensor,
    ):
        self.config, self.ops = config, ops
        self.embedding, self.layers = embedding, layers
        self.output_norm, self.output = output_norm, output
        self.inv_freq, self.inv_freq_swa = inv_freq, inv_freq_swa

    @classmethod
    def load(cls, config: ModelConfig, tensors: GGUFTensors, ops: TorchOps) -> Transformer:
        """Take the model's tensors from the file (quantized blocks as stored) onto ops.device."""
        device = ops.device

        def matrix(name: str) -> PreparedWeight:
            return ops.prepare(tensors.matrix(name).to(device))

        def vector(name: str) -> torch.Tensor | None:
            found = tensors.optional_vector(name)
            return None if found is None else found.to(device)

        layers = []
        for i in range(config.n_layer):
            p = f"blk.{i}."
            layers.append(
                Layer(
                    attn_norm=vector(p + "attn_norm.weight"),
                    wq=matrix(p + "attn_q.weight"),
                    wk=matrix(p + "attn_k.weight"),
                    wv=matrix(p + "attn_v.weight"),
                    wo=matrix(p + "attn_output.weight"),
                    ffn_norm=vector(p + "ffn_norm.weight"),
                    w_gate=matrix(p + "ffn_gate.weight"),
                    w_up=matrix(p + "ffn_up.weight"),
                    w_down=matrix(p + "ffn_down.weight"),
                    bq=vector(p + "attn_q.bias"),
                    bk=vector(p + "attn_k.bias"),
                    bv=vector(p + "attn_v.bias"),
                    bo=vector(p + "attn_output.bias"),
                    q_norm=vector(p + "attn_q_norm.weight"),
                    k_norm=vector(p + "attn_k_norm.weight"),
                    post_attn_norm=vector(p + "post_attention_norm.weight"),
                    post_ffn_norm=vector(p + "post_ffw_norm.weight"),
                )
            )
        # The embedding stays in host memory: only the rows of the tokens are ever read
        # (llama.cpp keeps it on the CPU too). A tied output matrix is the same tensor.
        embedding = tensors.matrix("token_embd.weight")
        output_name = "output.weight" if "output.weight" in tensors else "token_embd.weight"
        rope = config.rope
        factors = tensors.optional_vector("rope_freqs.weight")
        return cls(
            config,
            ops,
            embedding,
            layers,
            output_norm=vector("output_norm.weight"),
            output=matrix(output_name),
            inv_freq=inverse_frequencies(rope.n_rot, rope.freq_base, rope.freq_scale, factors),
            inv_freq_swa=inverse_frequencies(
                rope.n_rot, rope.freq_base_swa, rope.freq_scale_swa, factors
            ),
        )

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        cache: TorchKVCache,
        *,
        n_keys: int,
        all_logits: bool = False,
    ) -> torch.Tensor:
        """Run `tokens` [T] at `positions` [T] (on ops.device), writing their K and V into the
        cache; attention reads cache slots 0..n_keys-1. Returns the logits of the last token
        [vocab], or of every token [T, vocab] with `all_logits`."""
        cfg, ops = self.config, self.ops
        h = ops.embed_rows(self.embedding, tokens)
        if cfg.embed_scale != 1.0:
            h = h * cfg.embed_scale
        angles = rope_angles(positions, self.inv_freq, cfg.rope.attn_factor)
        angles_swa = rope_angles(positions, self.inv_freq_swa, cfg.rope.attn_factor)
        for i, layer in enumerate(self.layers):
            swa = cfg.is_swa(i)
            h = h + self._attention(
                layer, i, h, positions, cache, n_keys, swa, angles_swa if swa else angles
            )
            h = h + self._feed_forward(layer, h)
        if not all_logits:
            h = h[-1:]
        h = ops.rms_norm(h, self.output_norm, cfg.rms_eps)
        logits = ops.matmul(h, self.output)
        if cfg.final_softcap:
            logits = torch.tanh(logits / cfg.final_softcap) * cfg.final_softcap
        return logits if all_logits else logits[0]

    def _attention(self, layer, i, h, positions, cache, n_keys, swa, angles) -> torch.Tensor:
        cfg, ops = self.config, self.ops
        x = ops.rms_norm(h, layer.attn_norm, cfg.rms_eps)
        q = _linear(ops, x, layer.wq, layer.bq).view(-1, cfg.n_head, cfg.head_dim)
        k = _linear(ops, x, layer.wk, layer.bk).view(-1, cfg.n_head_kv, cfg.head_dim)
        v = _linear(ops, x, layer.wv, layer.bv).view(-1, cfg.n_head_kv, cfg.head_dim)
        if layer.q_norm is not None:
            q = ops.rms_norm(q, layer.q_norm, cfg.rms_eps)
            k = ops.rms_norm(k, layer.k_norm, cfg.rms_eps)
        cos, sin = angles
        q = ops.rope(q, cos, sin, cfg.rope.layout)
        k = ops.rope(k, cos, sin, cfg.rope.layout)
        cache.write(i, positions, k, v)
        window = cfg.swa_window if swa else 0
        a = cache.attend(i, q, positions, n_keys, scale=cfg.attn_scale, window=window)
        a = _linear(ops, a.reshape(a.shape[0], -1), layer.wo, layer.bo)
        if layer.post_attn_norm is not None:
            a = ops.rms_norm(a, layer.post_attn_norm, cfg.rms_eps)
        return a

    def _feed_forward(self, layer: Layer, h: torch.Tensor) -> torch.Tensor:
        cfg, ops = self.config, self.ops
        x = ops.rms_norm(h, layer.ffn_norm, cfg.rms_eps)
        gated = ops.gated_ffn_activation(
            ops.matmul(x, layer.w_gate), ops.matmul(x, layer.w_up), cfg.activation
        )
        f = ops.matmul(gated, layer.w_down)
        if layer.post_ffn_norm is not None:
            f = ops.rms_norm(f, layer.post_ffn_norm, cfg.rms_eps)
        return f


def _linear(ops: TorchOps, x, w: PreparedWeight, bias: torch.Tensor | None) -> torch.Tensor:
    y = ops.matmul(x, w)
    return y if bias is None else y + bias
