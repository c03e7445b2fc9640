"""A model's shape and math, read from its GGUF header: what the Hearth forward pass needs.

Pure (no torch): `model_config(info)` takes the header that engine.gguf read and returns a
`ModelConfig`, or raises `UnsupportedModel` saying why this engine cannot run the file (the
worker then loads it with llama.cpp instead).

The conventions are llama.cpp's, from its vendored source (llama-cpp-python 0.3.36):
- RoPE layout per architecture (llama_model_rope_type in src/llama-model.cpp): llama rotates
  pairs of neighbouring values (x[2i], x[2i+1]) ("normal": the converter permuted Q and K into
  that order); qwen2, qwen3 and gemma3 rotate x[i] with x[i + n_rot/2] ("neox").
- RoPE frequencies: theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factor[i], where
  freq_scale is 1/`rope.scaling.factor` for linear scaling and freq_factor is the optional
  `rope_freqs` tensor (Llama 3.1+). Gemma 3's sliding-window layers use `rope.freq_base_swa`
  (default 10000) and a scale of 1 (llama_model::get_rope_freq_base/scale).
- Attention scale: 1/sqrt(head_dim), except Gemma 3 27B (62 layers): 1/sqrt(n_embd/n_head)
  (models/gemma3.cpp, after gemma_pytorch's config).
- Gemma 3 (models/gemma3.cpp): the embedding is multiplied by sqrt(n_embd); Q and K are
  RMS-normed per head before RoPE; the attention and feed-forward outputs are RMS-normed again
  before each residual add; the feed-forward gate is GELU (tanh form, ggml_gelu); logits are
  soft-capped when `final_logit_softcapping` is set. Gemma's norms compute x * (1 + w) in
  PyTorch; the GGUF converter stores 1 + w, so every norm here is plain x * w.
- Sliding window (llama_hparams::is_masked_swa, standard kind): a query at position p sees keys
  at positions j with p - j < window. Which layers: engine.gguf.arch (five of six in Gemma 3).
- Qwen 3 normalizes Q and K per head like Gemma 3; Qwen 2 adds biases to Q, K and V.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.gguf import ModelInfo

# Embedding rows the forward pass keeps dequantized on the host (forward.Transformer); the
# planner counts them.
HOST_ROWS_KEPT = 4096

# Architecture traits that the header does not spell out (models/<arch>.cpp in llama.cpp).
_ARCHITECTURES = {
    "llama": dict(rope_layout="normal", activation="silu"),
    "qwen2": dict(rope_layout="neox", activation="silu"),
    "qwen3": dict(rope_layout="neox", activation="silu", qk_norm=True),
    "gemma3": dict(
        rope_layout="neox",
        activation="gelu_tanh",
        qk_norm=True,
        post_norms=True,
        scale_embedding=True,
    ),
}
SUPPORTED_ARCHITECTURES = tuple(_ARCHITECTURES)


class UnsupportedModel(Exception):
    """This engine cannot run the model; the message says why (one line)."""


@dataclass(frozen=True)
class RopeConfig:
    layout: str  # "normal" (pairs of neighbours, llama) or "neox" (halves)
    n_rot: int  # leading values of each head that are rotated
    freq_base: float
    freq_scale: float  # 1 / linear scaling factor
    freq_base_swa: float  # for sliding-window layers
    freq_scale_swa: float
    attn_factor: float = 1.0  # multiplies cos and sin (`rope.scaling.attn_factor`)
    has_freq_factors: bool = False  # a `rope_freqs` tensor divides each frequency


@dataclass(frozen=True)
class ModelConfig:
    architecture: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    rms_eps: float
    activation: str  # "silu" or "gelu_tanh": the gate of the gated feed-forward
    rope: RopeConfig
    attn_scale: float
    embed_scale: float = 1.0
    qk_norm: bool = False
    post_norms: bool = False
    final_softcap: float = 0.0  # 0: logits are not capped
    swa_window: int = 0  # 0: no sliding-window layers
    swa_layers: tuple[bool, ...] = ()

    @property
    def n_rep(self) -> int:
        """Query heads per KV head (grouped-query attention)."""
        return self.n_head // self.n_head_kv

    def is_swa(self, layer: int) -> bool:
        return self.swa_window > 0 and bool(self.swa_layers[layer])


def model_config(info: ModelInfo) -> ModelConfig:
    """The configuration of the model in `info`; UnsupportedModel when this engine can't run it."""
    arch = info.architecture or "(none)"
    traits = _ARCHITECTURES.get(arch)
    if traits is None:
        raise UnsupportedModel(
            f"architecture {arch!r} is not one the Hearth engine runs "
            f"({', '.join(SUPPORTED_ARCHITECTURES)})"
        )
    meta = info.metadata

    def number(key: str, default: float | None = None) -> float | None:
        value = meta.get(f"{arch}.{key}", default)
        return value if isinstance(value, int | float) else default

    if info.is_split:
        raise UnsupportedModel("split GGUF files are not read by the Hearth engine yet")
    if (info.expert_count or 0) > 0:
        raise UnsupportedModel("mixture-of-experts models are not run by the Hearth engine yet")
    n_layer = info.n_layer
    n_head, n_head_kv, n_ff = (
        _uniform(info.head_count, "attention.head_count"),
        _uniform(info.head_count_kv, "attention.head_count_kv"),
        _uniform(info.feed_forward_length, "feed_forward_length"),
    )
    n_embd = info.embedding_length or 0
    if not (n_layer and n_embd and n_head and n_head_kv and n_ff):
        raise UnsupportedModel("the file does not give the model's dimensions")
    if n_head % n_head_kv:
        raise UnsupportedModel(f"{n_head} query heads do not share {n_head_kv} KV heads evenly")
    head_dim = info.key_length or n_embd // n_head
    if info.value_length != head_dim:
        raise UnsupportedModel("keys and values of different lengths are not supported")
    n_rot = int(number("rope.dimension_count", head_dim))
    if n_rot != head_dim:
        raise UnsupportedModel(f"partial RoPE ({n_rot} of {head_dim} values) is not supported")

    scaling = meta.get(f"{arch}.rope.scaling.type", "linear")
    if scaling not in ("none", "linear"):
        raise UnsupportedModel(f"RoPE scaling {scaling!r} is not supported yet")
    factor = number("rope.scaling.factor") or number("rope.scale_linear") or 0.0
    rope = RopeConfig(
        layout=traits["rope_layout"],
        n_rot=n_rot,
        freq_base=float(number("rope.freq_base", 10000.0)),
        freq_scale=1.0 / factor if factor else 1.0,
        freq_base_swa=float(number("rope.freq_base_swa", 10000.0)),
        freq_scale_swa=1.0,
        attn_factor=float(number("rope.scaling.attn_factor", 1.0)),
        has_freq_factors=info.tensor("rope_freqs.weight") is not None,
    )

    if arch == "gemma3" and n_layer == 62:  # the 27B model
        attn_scale = 1.0 / math.sqrt(n_embd / n_head)
    else:
        attn_scale = 1.0 / math.sqrt(head_dim)
    window = info.sliding_window
    swa_window, swa_layers = 0, ()
    if window is not None:
        if window.kind != "standard":
            raise UnsupportedModel(f"{window.kind} sliding-window attention is not supported")
        swa_window, swa_layers = window.size, window.layers

    eps = number("attention.layer_norm_rms_epsilon")
    if eps is None:
        raise UnsupportedModel("the file does not give the RMS norm epsilon")
    return ModelConfig(
        architecture=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=n_ff,
        n_vocab=info.vocab_size or 0,
        n_ctx_train=info.context_length or 0,
        rms_eps=float(eps),
        activation=traits["activation"],
        rope=rope,
        attn_scale=attn_scale,
        embed_scale=math.sqrt(n_embd) if traits.get("scale_embedding") else 1.0,
        qk_norm=traits.get("qk_norm", False),
        post_norms=traits.get("post_norms", False),
        final_softcap=float(number("final_logit_softcapping", 0.0)),
        swa_window=swa_window,
        swa_layers=swa_layers,
    )


def _uniform(value: int | tuple[int, ...] | None, key: str) -> int:
    """One value for every layer; per-layer values that differ are not supported."""
    if isinstance(value, tuple):
        if len(set(value)) > 1:
            raise UnsupportedModel(f"{key} differs between layers, which is not supported")
        return value[0] if value else 0
    return value or 0
