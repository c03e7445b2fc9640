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
- YaRN (`rope.scaling.type` "yarn"; llama-context.cpp and ggml's rope_yarn): dimension pair i
  turns at theta_i = pos * inv_i * ((1 - r_i) * freq_scale + r_i), where inv_i is the plain
  frequency and the ramp r_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1) keeps the
  high frequencies unscaled; low = floor(d(32)), high = ceil(d(1)) clamped to [0, n_rot - 1],
  d(b) = n_rot * ln(n_ctx_orig / (2 pi b)) / (2 ln base), n_ctx_orig being
  `rope.scaling.original_context_length` (else the training context). cos and sin are scaled
  by attn_factor * (1 + 0.1 ln factor) (llama.cpp's yarn_attn_factor times rope_yarn's mscale,
  for these architectures: no `yarn_log_multiplier`).

Mixture-of-experts layers (build_moe_ffn in src/llama-graph.cpp; models/qwen3moe.cpp,
qwen2moe.cpp, openai-moe.cpp, llama.cpp): a router matrix `ffn_gate_inp` gives one logit per
expert; each token goes through `expert_used_count` of the `expert_count` experts (SwiGLU
feed-forwards stored as 3-D `ffn_{gate,up,down}_exps` tensors), their outputs summed with the
routing weights. How the weights come from the logits is fixed per architecture in llama.cpp
(not read from the file's expert_weights_norm / expert_gating_func keys):
- qwen3moe and llama (Mixtral): softmax over all experts, the top k taken, renormalized to sum
  to 1 (the sum clamped below at 2^-14);
- qwen2moe: softmax, top k, not renormalized; plus a shared expert (`ffn_*_shexp`) on every
  token, scaled by sigmoid(x . ffn_gate_inp_shexp);
- gpt-oss: the top k logits (after the router's bias), softmaxed over those k; experts with
  biases and the clamped SwiGLU "swiglu_oai": out = g * sigmoid(1.702 g) * (u + 1) with
  g = min(gate, 7) and u = clamp(up, -7, 7).
gpt-oss also adds a learned logit per head (`attn_sinks`) to every softmax denominator,
biases Q, K, V and the output, norms the feed-forward input with `post_attention_norm`, and
alternates sliding-window layers (even layers, window `attention.sliding_window`) with full
ones, both with the same RoPE (YaRN).
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
    "qwen2moe": dict(rope_layout="neox", activation="silu", moe="softmax"),
    "qwen3moe": dict(rope_layout="neox", activation="silu", qk_norm=True, moe="softmax_norm"),
    "gpt-oss": dict(
        rope_layout="neox",
        activation="swiglu_oai",
        moe="topk_softmax",
        attn_sinks=True,
        swa_rope_shared=True,
        ffn_norm_tensor="post_attention_norm.weight",
    ),
}
SUPPORTED_ARCHITECTURES = tuple(_ARCHITECTURES)
# Dense architectures whose files may carry experts instead of a feed-forward (Mixtral is a
# llama with experts), and how their experts are weighted.
_MOE_OF_DENSE = {"llama": "softmax_norm"}
# Routing rules: (gating, renormalize) as build_moe_ffn takes them.
_ROUTING = {
    "softmax": ("softmax", False),
    "softmax_norm": ("softmax", True),
    "topk_softmax": ("topk_softmax", False),
}
SWIGLU_OAI_ALPHA = 1.702
SWIGLU_OAI_LIMIT = 7.0
YARN_BETA_FAST = 32.0  # llama_hparams' defaults (no file sets them for these architectures)
YARN_BETA_SLOW = 1.0


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
    attn_factor: float = 1.0  # multiplies cos and sin (with YaRN, its mscale too)
    has_freq_factors: bool = False  # a `rope_freqs` tensor divides each frequency
    yarn: YarnConfig | None = None  # YaRN's ramp between scaled and unscaled frequencies


@dataclass(frozen=True)
class YarnConfig:
    """YaRN's ramp (see the module docstring): the original context and the two betas."""

    n_ctx_orig: int
    beta_fast: float = YARN_BETA_FAST
    beta_slow: float = YARN_BETA_SLOW


@dataclass(frozen=True)
class MoeConfig:
    """The experts of every layer (see the module docstring)."""

    n_expert: int
    n_expert_used: int
    n_ff_exp: int  # rows of each expert's gate and up matrices
    gating: str  # "softmax": top k of softmax(all); "topk_softmax": softmax of the top-k logits
    normalize: bool  # the k weights divided by their sum
    n_ff_shexp: int = 0  # the shared expert's width; 0: none
    shared_gate: bool = False  # the shared expert scaled by sigmoid(x . ffn_gate_inp_shexp)


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
    activation: str  # "silu", "gelu_tanh" or "swiglu_oai": the gated feed-forward's gate
    rope: RopeConfig
    attn_scale: float
    embed_scale: float = 1.0
    qk_norm: bool = False
    post_norms: bool = False
    final_softcap: float = 0.0  # 0: logits are not capped
    swa_window: int = 0  # 0: no sliding-window layers
    swa_layers: tuple[bool, ...] = ()
    attn_sinks: bool = False  # a learned logit per head in every softmax's denominator
    ffn_norm_tensor: str = "ffn_norm.weight"  # the feed-forward's input norm, per layer
    moe: MoeConfig | None = None  # None: a dense feed-forward in every layer

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
    n_layer = info.n_layer
    n_head, n_head_kv, n_ff = (
        _uniform(info.head_count, "attention.head_count"),
        _uniform(info.head_count_kv, "attention.head_count_kv"),
        _uniform(info.feed_forward_length, "feed_forward_length"),
    )
    n_embd = info.embedding_length or 0
    moe = _moe_config(info, traits.get("moe") or _MOE_OF_DENSE.get(arch), n_ff)
    if not (n_layer and n_embd and n_head and n_head_kv and (n_ff or moe)):
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
    if scaling not in ("none", "linear", "yarn"):
        raise UnsupportedModel(f"RoPE scaling {scaling!r} is not supported yet")
    factor = number("rope.scaling.factor") or number("rope.scale_linear") or 0.0
    freq_scale = 1.0 / factor if factor and scaling != "none" else 1.0
    freq_base = float(number("rope.freq_base", 10000.0))
    attn_factor = float(number("rope.scaling.attn_factor", 1.0))
    yarn = None
    if scaling == "yarn":
        n_ctx_orig = int(number("rope.scaling.original_context_length", 0) or 0)
        yarn = YarnConfig(n_ctx_orig=n_ctx_orig or info.context_length or 0)
        attn_factor *= yarn_mscale(1.0 / freq_scale)
    shared = traits.get("swa_rope_shared", False)  # gpt-oss: SWA layers rotate as the others
    rope = RopeConfig(
        layout=traits["rope_layout"],
        n_rot=n_rot,
        freq_base=freq_base,
        freq_scale=freq_scale,
        freq_base_swa=float(number("rope.freq_base_swa", freq_base if shared else 10000.0)),
        freq_scale_swa=freq_scale if shared else 1.0,
        attn_factor=attn_factor,
        has_freq_factors=info.tensor("rope_freqs.weight") is not None,
        yarn=yarn,
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
        attn_sinks=traits.get("attn_sinks", False),
        ffn_norm_tensor=traits.get("ffn_norm_tensor", "ffn_norm.weight"),
        moe=moe,
    )


def yarn_mscale(factor: float) -> float:
    """YaRN's factor on cos and sin for a context `factor` times the original: 1 + 0.1 ln f
    (1 when f <= 1), llama.cpp's get_mscale(f, 1)."""
    return 1.0 + 0.1 * math.log(factor) if factor > 1.0 else 1.0


def _moe_config(info: ModelInfo, routing: str | None, n_ff: int) -> MoeConfig | None:
    """The experts' configuration; None for a dense model; UnsupportedModel for experts this
    engine does not run."""
    arch = info.architecture
    n_expert = info.expert_count or 0
    if not n_expert:
        if routing is not None and arch not in _MOE_OF_DENSE:
            raise UnsupportedModel(f"the {arch} file gives no expert_count")
        return None
    if routing is None:
        raise UnsupportedModel(f"{arch} models with experts are not run by the Hearth engine")
    if info.expert_shared_count and arch != "qwen2moe":
        raise UnsupportedModel(f"shared experts in {arch} models are not supported")
    n_used = _uniform(info.expert_used_count, "expert_used_count")
    if not 0 < n_used <= n_expert:
        raise UnsupportedModel(f"{n_used} experts used of {n_expert} is not a valid routing")
    meta = info.metadata
    n_ff_exp = meta.get(f"{arch}.expert_feed_forward_length")
    if isinstance(n_ff_exp, tuple | list):
        n_ff_exp = _uniform(tuple(n_ff_exp), "expert_feed_forward_length")
    up = info.tensor("blk.0.ffn_up_exps.weight")
    if up is None:
        raise UnsupportedModel(
            f"{arch} experts stored one tensor per expert (an old conversion) are not read "
            "by the Hearth engine; a newer conversion of the model has ffn_up_exps tensors"
        )
    if len(up.shape) != 3 or up.shape[2] != n_expert:
        raise UnsupportedModel(f"ffn_up_exps has shape {up.shape}, not [n_embd, n_ff, experts]")
    n_ff_exp = int(n_ff_exp or up.shape[1])
    if info.tensor("blk.0.ffn_gate_exps.weight") is None:
        raise UnsupportedModel("experts without a gate matrix (ffn_gate_exps) are not supported")
    gating, normalize = _ROUTING[routing]
    n_ff_shexp = 0
    if arch == "qwen2moe":  # the shared expert's width; llama.cpp defaults it to n_ff
        n_ff_shexp = int(meta.get(f"{arch}.expert_shared_feed_forward_length", 0) or n_ff)
    return MoeConfig(
        n_expert=n_expert,
        n_expert_used=n_used,
        n_ff_exp=n_ff_exp,
        gating=gating,
        normalize=normalize,
        n_ff_shexp=n_ff_shexp,
        shared_gate=arch == "qwen2moe",
    )


def _uniform(value: int | tuple[int, ...] | None, key: str) -> int:
    """One value for every layer; per-layer values that differ are not supported."""
    if isinstance(value, tuple):
        if len(set(value)) > 1:
            raise UnsupportedModel(f"{key} differs between layers, which is not supported")
        return value[0] if value else 0
    return value or 0
