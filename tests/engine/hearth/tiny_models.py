"""Tiny GGUF models with random weights, one per architecture the Hearth engine runs.

Written with the `gguf` package. Matrices are quantized with its numpy quantizers where it has
one (Q4_0, Q4_1, Q5_0, Q8_0, F16, BF16); k-quant blocks (Q4_K, Q5_K, Q6_K), which it cannot
produce, are random bytes with their scale fields set to sane f16 values, which is all a
dequantizer needs. Dimensions are odd on purpose (3 KV heads for 6 query heads, a vocabulary
that is no power of two) but multiples of 256 where k-quant rows need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

QT = GGMLQuantizationType
# Byte offsets of the f16 scale fields in a k-quant block (ggml-common.h).
_KQUANT_SCALES = {QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,)}
_KQUANT_BLOCK = {QT.Q4_K: 144, QT.Q5_K: 176, QT.Q6_K: 210}


@dataclass(frozen=True)
class TinySpec:
    arch: str
    n_layer: int = 3
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 512
    n_vocab: int = 301
    matrix_type: QT = QT.Q8_0
    tied: bool = True
    biases: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    sliding_window: int = 0
    rope_freq_factors: bool = False
    rope_scale: float = 0.0


def tiny_spec(arch: str, **changes) -> TinySpec:
    presets = {
        "llama": dict(n_head=6, n_head_kv=3, head_dim=32, n_embd=192, n_ff=320),
        "qwen2": dict(biases=True, tied=False, matrix_type=QT.Q4_1),
        "qwen3": dict(qk_norm=True, matrix_type=QT.Q4_K),
        "gemma3": dict(
            n_head=4,
            n_head_kv=1,
            qk_norm=True,
            post_norms=True,
            sliding_window=3,
            matrix_type=QT.Q5_0,
        ),
    }
    return TinySpec(arch=arch, **{**presets[arch], **changes})


def write_tiny_gguf(path: Path, spec: TinySpec, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    arch = spec.arch
    writer = GGUFWriter(str(path), arch)
    writer.add_block_count(spec.n_layer)
    writer.add_context_length(512)
    writer.add_embedding_length(spec.n_embd)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_key_length(spec.head_dim)
    writer.add_value_length(spec.head_dim)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_rope_freq_base(10000.0 if arch != "gemma3" else 1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(spec.n_vocab)
    if spec.sliding_window:
        writer.add_sliding_window(spec.sliding_window)
    if spec.rope_scale:
        writer.add_rope_scaling_type(__import__("gguf").RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(spec.rope_scale)

    def matrix(name: str, rows: int, cols: int, qtype: QT | None = None) -> None:
        qtype = qtype or spec.matrix_type
        values = rng.standard_normal((rows, cols)).astype(np.float32) / np.sqrt(cols)
        if qtype in _KQUANT_BLOCK:
            writer.add_tensor(name, _random_kquant(rng, rows, cols, qtype), raw_dtype=qtype)
        elif qtype == QT.F16:
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, quantize(values, qtype), raw_dtype=qtype)

    def vector(name: str, n: int, around: float = 1.0) -> None:
        writer.add_tensor(name, (around + 0.1 * rng.standard_normal(n)).astype(np.float32))

    e, kv = spec.n_embd, spec.n_head_kv * spec.head_dim
    q = spec.n_head * spec.head_dim
    matrix("token_embd.weight", spec.n_vocab, e, QT.Q8_0)
    vector("output_norm.weight", e)
    if not spec.tied:
        matrix("output.weight", spec.n_vocab, e, QT.Q6_K if e % 256 == 0 else QT.Q8_0)
    if spec.rope_freq_factors:
        vector("rope_freqs.weight", spec.head_dim // 2, around=2.0)
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", e)
        matrix(p + "attn_q.weight", q, e)
        matrix(p + "attn_k.weight", kv, e)
        matrix(p + "attn_v.weight", kv, e, QT.Q8_0)
        matrix(p + "attn_output.weight", e, q, QT.F16)
        if spec.biases:
            vector(p + "attn_q.bias", q, around=0.0)
            vector(p + "attn_k.bias", kv, around=0.0)
            vector(p + "attn_v.bias", kv, around=0.0)
        if spec.qk_norm:
            vector(p + "attn_q_norm.weight", spec.head_dim)
            vector(p + "attn_k_norm.weight", spec.head_dim)
        vector(p + "ffn_norm.weight", e)
        matrix(p + "ffn_gate.weight", spec.n_ff, e)
        matrix(p + "ffn_up.weight", spec.n_ff, e)
        matrix(p + "ffn_down.weight", e, spec.n_ff, QT.Q8_0)
        if spec.post_norms:
            vector(p + "post_attention_norm.weight", e)
            vector(p + "post_ffw_norm.weight", e)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _random_kquant(rng: np.random.Generator, rows: int, cols: int, qtype: QT) -> np.ndarray:
    block = _KQUANT_BLOCK[qtype]
    n_blocks = rows * cols // 256
    data = rng.integers(0, 256, size=(n_blocks, block), dtype=np.uint8)
    for offset in _KQUANT_SCALES[qtype]:
        scale = rng.uniform(0.0005, 0.001, n_blocks).astype(np.float16)
        data[:, offset : offset + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
    if qtype == QT.Q6_K:  # int8 sub-block scales: keep them small and centred
        data[:, 192:208] = rng.integers(-8, 8, size=(n_blocks, 16)).astype(np.int8).view(np.uint8)
    return data.reshape(rows, -1)
