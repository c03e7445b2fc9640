"""The speed of light of decoding: the fastest a model can decode on a device, from the bytes each
token must read and the bandwidth the device was measured to copy at.

    bytes = decode_bytes_per_token(info, n_keys=1200, type_k="f16", type_v="f16")
    bound = bound_tokens_per_second(bytes, bandwidth_gbps=3000.0)     # tokens per second
    gauge_text(tok_s=210.0, bound=bound)  -> "61% of the 344 tok/s bound"

A decode step reads every weight matrix once (a GEMV is bound by its weights, not its few
multiply-adds), and the KV cache of every position it attends to. So

    bound = bandwidth / (weights read per token + KV read per token)

Weights read per token: every tensor of the file except the token embedding (a step reads one
row of it), unless the model has no `output.weight` and uses the embedding as its output matrix
(then the output GEMV reads it whole). A mixture-of-experts layer reads only the experts the
router selects: the expert tensors (`*_exps`) count k/n of their bytes, k experts used of n.

KV read per token: K and V rows of every position attended to, in the cache's storage format;
a sliding-window layer reads at most its window. A reply's gauge takes the mean depth over its
decode steps (the prompt plus half the reply).

The measured bandwidth is a device-to-device copy (read + write counted; engine/hardware/
copy_rate.py), the rate the issue's kernels are judged against; a published figure would put
the bound higher than any kernel can reach.
"""

from __future__ import annotations

from engine.gguf import ModelInfo

GB = 1e9
_EMBEDDING = "token_embd.weight"
_OUTPUT = "output.weight"

# Bytes a value takes in llama.cpp's K/V cache types (ggml's block sizes: bytes per 32 values).
_LLAMA_KV_BYTES = {
    "f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
    "q5_0": 22 / 32, "q5_1": 24 / 32, "iq4_nl": 18 / 32,
}  # fmt: skip


def kv_value_bytes(fmt: str, head_dim: int) -> float:
    """Bytes one cached value takes in `fmt`: llama.cpp's types, or the Hearth engine's formats
    (kernels/kv_formats.py, scales included)."""
    if fmt in _LLAMA_KV_BYTES:
        return _LLAMA_KV_BYTES[fmt]
    from kernels.kv_formats import KV_FORMATS, bytes_per_row

    if fmt in KV_FORMATS and head_dim > 0:
        return bytes_per_row(fmt, head_dim) / head_dim
    raise ValueError(f"unknown KV cache type {fmt!r}")


def weight_bytes_per_token(info: ModelInfo) -> int:
    """Bytes of weights one decode step reads: every matrix once, the selected experts only."""
    has_output = info.tensor(_OUTPUT) is not None
    total = 0.0
    for t in info.tensors:
        if t.name == _EMBEDDING and has_output:
            continue  # one row is read: negligible
        if "_exps." in t.name:
            layer = t.layer or 0
            n_expert = info.expert_count or 1
            used = info.n_expert_used(layer) or n_expert
            total += t.n_bytes * min(1.0, used / n_expert)
        else:
            total += t.n_bytes
    return int(total)


def kv_bytes_per_token(info: ModelInfo, n_keys: int, type_k: str, type_v: str) -> int:
    """Bytes of K and V one decode step reads when it attends to `n_keys` positions."""
    total = 0.0
    window = info.sliding_window.size if info.sliding_window else 0
    for layer in range(info.n_layer):
        heads = info.n_head_kv(layer)
        if heads <= 0:
            continue  # a recurrent layer: no KV cache
        head_k = info.key_length_at(layer) or _head_dim(info, layer)
        head_v = info.value_length_at(layer) or head_k
        keys = min(n_keys, window) if window and info.is_swa_layer(layer) else n_keys
        row = head_k * kv_value_bytes(type_k, head_k) + head_v * kv_value_bytes(type_v, head_v)
        total += keys * heads * row
    return int(total)


def _head_dim(info: ModelInfo, layer: int) -> int:
    heads = info.n_head(layer)
    return (info.embedding_length or 0) // heads if heads else 0


def decode_bytes_per_token(info: ModelInfo, n_keys: int, type_k: str, type_v: str) -> int:
    return weight_bytes_per_token(info) + kv_bytes_per_token(info, n_keys, type_k, type_v)


def bound_tokens_per_second(bytes_per_token: int, bandwidth_gbps: float) -> float:
    """Tokens per second if every byte moved at `bandwidth_gbps`; 0 when either is unknown."""
    if bytes_per_token <= 0 or bandwidth_gbps <= 0:
        return 0.0
    return bandwidth_gbps * GB / bytes_per_token


def reply_depth(n_prompt_tokens: int, n_generated: int) -> int:
    """The mean number of positions a reply's decode steps attend to."""
    return n_prompt_tokens + max(0, n_generated - 1) // 2


def gauge_text(tok_s: float, bound: float) -> str:
    """ "61% of the 344 tok/s bound"; '' when there is no bound or no speed to set beside it."""
    if bound <= 0 or tok_s <= 0:
        return ""
    share = 100.0 * tok_s / bound
    figure = f"{bound:,.0f}" if bound >= 10 else f"{bound:.1f}"
    return f"{share:.0f}% of the {figure} tok/s bound"
