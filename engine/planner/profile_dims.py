"""The dimensions of a model that the memory model needs, read defensively from a ModelInfo.

KV widths follow llama_hparams (src/llama-hparams.cpp): a layer's K row holds
n_embd_k_gqa(il) = key_length(il) x n_head_kv(il) values, V likewise; layers without KV heads
are recurrent (or have no attention) and hold state instead. For multi-head latent attention
(DeepSeek-V2/V3, Kimi) the cache stores one latent of kv_lora_rank + n_rot values per token and
no V (llama_kv_cache: has_v = !is_mla). Recurrent state sizes follow llama_hparams::n_embd_r()
and n_embd_s(), in f32 (llama_memory_recurrent is created with GGML_TYPE_F32 for both).
"""

from __future__ import annotations

from engine.gguf import ModelInfo
from engine.planner.profile import (
    EXPERT_TENSOR,
    KNOWN_ARCHITECTURES,
    NORM_HEAVY_ARCHITECTURES,
    KVLayer,
    ModelProfile,
)


def _meta_int(info: ModelInfo, key: str) -> int | None:
    value = info.metadata.get(f"{info.architecture}.{key}")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shape(info: ModelInfo, name: str) -> tuple[int, ...] | None:
    tensor = info.tensor(name)
    return tensor.shape if tensor is not None else None


def _recurrent_state_bytes(info: ModelInfo, n_embd: int) -> int:
    rec = info.recurrent
    if rec is None:
        return 0
    values = 0
    if rec.ssm_inner_size and rec.ssm_state_size:
        d_inner, d_state = rec.ssm_inner_size, rec.ssm_state_size
        groups = rec.ssm_group_count or 1
        conv = max(0, (rec.ssm_conv_kernel or 4) - 1)
        values += conv * (d_inner + 2 * groups * d_state) + d_state * d_inner
    elif rec.wkv_head_size:
        values += 2 * n_embd + n_embd * rec.wkv_head_size
    elif rec.shortconv_l_cache:
        values += max(0, rec.shortconv_l_cache - 1) * n_embd
    return 4 * values


def model_dims(info: ModelInfo) -> dict:
    """Keyword arguments for ModelProfile (everything except `info`)."""
    notes: list[str] = []
    n_layer = info.n_layer
    embd_shape = _shape(info, "token_embd.weight")
    n_embd = info.embedding_length or (embd_shape[0] if embd_shape else 0)
    out_shape = _shape(info, "output.weight") or embd_shape
    n_vocab = info.vocab_size or (out_shape[1] if out_shape and len(out_shape) > 1 else 0)

    heads = [info.n_head(il) for il in range(n_layer)] or [0]
    key_len = info.key_length or (n_embd // max(1, max(heads)))
    value_len = info.value_length or key_len
    q_dim = max(
        (info.n_head(il) * (info.key_length_at(il) or key_len) for il in range(n_layer)),
        default=n_embd,
    )

    shared = _meta_int(info, "attention.shared_kv_layers") or 0
    rope_dims = _meta_int(info, "rope.dimension_count") or 64
    state = _recurrent_state_bytes(info, n_embd)
    kv_layers = []
    for il in range(n_layer):
        n_kv = info.n_head_kv(il)
        recurrent = info.is_recurrent_layer(il)
        has_kv = n_kv > 0 and not recurrent and not (shared and il >= n_layer - shared)
        if info.mla is not None and has_kv:
            k_width, v_width = info.mla.kv_lora_rank + rope_dims, 0
        else:
            k_width = (info.key_length_at(il) or key_len) * n_kv
            v_width = (info.value_length_at(il) or value_len) * n_kv
        kv_layers.append(
            KVLayer(
                has_kv=has_kv,
                swa=info.is_swa_layer(il),
                k_width=k_width if has_kv else 0,
                v_width=v_width if has_kv else 0,
                state_bytes=state if recurrent else 0,
            )
        )

    n_expert = info.expert_count or 0
    n_expert_used = max((info.n_expert_used(il) for il in range(n_layer)), default=0)
    n_ff = max((info.n_ff(il) for il in range(n_layer)), default=0)
    n_ff_exp = _meta_int(info, "expert_feed_forward_length") or 0
    if n_expert and not n_ff_exp:
        for t in info.tensors:
            if EXPERT_TENSOR.match(t.name) and "_up_" in t.name and len(t.shape) >= 2:
                n_ff_exp = t.shape[1]
                break
        else:
            n_ff_exp = n_ff // max(1, n_expert_used)

    arch = info.architecture or ""
    known = arch in KNOWN_ARCHITECTURES and info.mla is None and info.recurrent is None
    if info.mla is not None:
        notes.append("multi-head latent attention: the KV cache holds one latent per token")
    if info.recurrent is not None:
        notes.append("recurrent layers: their state is fixed-size, not per token")
    if arch not in KNOWN_ARCHITECTURES:
        notes.append(f"architecture {arch or '(none)'!r} is not one the memory model was fitted to")
    if not n_layer or not n_embd or not n_vocab:
        notes.append("the file lacks basic dimensions; the estimate is rough")
        known = False
    window = info.sliding_window
    return {
        "kv_layers": tuple(kv_layers),
        "n_embd": n_embd,
        "n_vocab": n_vocab,
        "q_dim": q_dim,
        "n_head": max(heads),
        "n_ff": n_ff,
        "n_expert": n_expert,
        "n_expert_used": n_expert_used,
        "n_ff_exp": n_ff_exp,
        "head_dim_k": key_len,
        "head_dim_v": value_len,
        "swa_window": window.size if window is not None and window.n_swa_layers else 0,
        "known_architecture": known,
        "norm_heavy": arch in NORM_HEAVY_ARCHITECTURES,
        "notes": tuple(notes),
    }


def build_profile(info: ModelInfo) -> ModelProfile:
    """Everything placement-independent about `info`; never raises for odd metadata."""
    return ModelProfile(info=info, **model_dims(info))
