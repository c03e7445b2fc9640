"""Tiny GGUF models with random weights, one per architecture the Hearth engine runs.

Mixture-of-experts specs (qwen3moe, qwen2moe, gpt-oss, llama with experts) write 3-D expert
tensors, the router, shared experts, gpt-oss's MXFP4 experts with biases, attention sinks,
alternating sliding windows and YaRN. `vocab_from` copies a real model's tokenizer into the
file (and sizes the vocabulary by it), so llama.cpp can load it too.

Written with the `gguf` package. Matrices are quantized with its numpy quantizers where it has
one (Q4_0, Q4_1, Q5_0, Q8_0, F16, BF16); k-quant blocks (Q4_K, Q5_K, Q6_K), which it cannot
produce, are random bytes with their scale fields set to sane f16 values, which is all a
dequantizer needs. Dimensions are odd on purpose (3 KV heads for 6 query heads, a vocabulary
that is no power of two) but multiples of 256 where k-quant rows need it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

from testkit.synthetic_gguf import add_hyperparameters

QT = GGMLQuantizationType
# Byte offsets of the f16 scale fields in a k-quant block (ggml-common.h).
_KQUANT_SCALES = {QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,)}
_KQUANT_BLOCK = {QT.Q4_K: 144, QT.Q5_K: 176, QT.Q6_K: 210}
# Routing by clear margins. Random routers over random activations make near-ties between the
# k-th and the next expert's logits, where rounding (an f16 cache, llama.cpp's 8-bit
# activations) sends a token through another expert and moves its logits by whole units. So in
# MoE specs the first m = log2(n_expert / k) embedding values are +-ROUTE_VALUE (a random sign
# pattern per token), and router row e reads them with the signs of its group e // k (its bits)
# times ROUTE_WEIGHT, plus small random weights: a token's k chosen experts are the group whose
# signs match its own, by a margin of about 2 in the logits, and the random weights rank and
# weight the experts within and outside the group.
ROUTE_VALUE = 4.0
ROUTE_WEIGHT = 0.3
ROUTER_NOISE = 0.3


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
    wo_type: QT = QT.F16  # the attention's output projection
    tied: bool = True
    biases: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    sliding_window: int = 0
    rope_freq_factors: bool = False
    rope_scale: float = 0.0
    yarn_orig_ctx: int = 0  # > 0: YaRN scaling by rope_scale from this original context
    n_expert: int = 0  # > 0: every layer's feed-forward is a mixture of experts
    n_expert_used: int = 2
    n_ff_exp: int = 64
    expert_type: QT = QT.Q8_0
    n_ff_shexp: int = 0  # qwen2moe's shared expert
    expert_biases: bool = False  # gpt-oss: router and expert biases
    attn_sinks: bool = False
    output_scale: float = 1.0  # multiplies the output matrix: logits spread over a few units


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
        "qwen3moe": dict(
            n_layer=2, n_embd=64, head_dim=16, n_ff=0, qk_norm=True, n_expert=8, tied=False,
            n_ff_exp=32, expert_type=QT.Q4_0, matrix_type=QT.Q8_0,
        ),
        "qwen2moe": dict(
            n_layer=2, n_embd=64, head_dim=16, n_ff=96, biases=True, tied=False, n_expert=4,
            n_ff_exp=32, n_ff_shexp=64, expert_type=QT.Q8_0, matrix_type=QT.Q4_1,
        ),
        "gpt-oss": dict(
            n_layer=2, n_embd=64, head_dim=16, n_ff=0, biases=True, tied=False, n_expert=4,
            n_ff_exp=64, expert_type=QT.MXFP4, expert_biases=True, attn_sinks=True,
            sliding_window=3, rope_scale=4.0, yarn_orig_ctx=4096, matrix_type=QT.Q8_0,
        ),
        "llama-moe": dict(
            arch="llama", n_layer=2, n_embd=64, head_dim=16, n_ff=32, n_expert=4, tied=False,
            n_ff_exp=32, expert_type=QT.Q5_0, matrix_type=QT.Q8_0,
        ),
    }  # fmt: skip
    fields = {"arch": arch, **presets[arch], **changes}
    return TinySpec(**fields)


def write_tiny_gguf(
    path: Path, spec: TinySpec, seed: int = 0, vocab_from: Path | None = None
) -> Path:
    """Write `spec` with random weights (`seed`) to `path`; with `vocab_from`, that GGUF's
    tokenizer and vocabulary size."""
    rng = np.random.default_rng(seed)
    arch = spec.arch
    writer = GGUFWriter(str(path), arch)
    add_hyperparameters(writer, spec, 512, 10000.0 if arch != "gemma3" else 1_000_000.0)
    n_vocab = spec.n_vocab
    if vocab_from is not None:
        n_vocab = _add_vocabulary(writer, str(vocab_from))
    writer.add_vocab_size(n_vocab)
    if spec.sliding_window:
        writer.add_sliding_window(spec.sliding_window)
    if spec.rope_scale:
        kind = gguf.RopeScalingType.YARN if spec.yarn_orig_ctx else gguf.RopeScalingType.LINEAR
        writer.add_rope_scaling_type(kind)
        writer.add_rope_scaling_factor(spec.rope_scale)
        if spec.yarn_orig_ctx:
            writer.add_rope_scaling_orig_ctx_len(spec.yarn_orig_ctx)
    if spec.n_expert and spec.n_ff_shexp:
        writer.add_expert_shared_feed_forward_length(spec.n_ff_shexp)

    def matrix(
        name: str, rows: int, cols: int, qtype: QT | None = None, scale=1.0, n=0, values=None
    ) -> None:
        """A [rows, cols] matrix, or n of them stacked ([n, rows, cols]: experts)."""
        qtype = spec.matrix_type if qtype is None else qtype  # QT.F32 is 0: not `or`
        shape = (n, rows, cols) if n else (rows, cols)
        if values is None:
            values = scale * rng.standard_normal(shape).astype(np.float32) / np.sqrt(cols)
        if qtype == QT.IQ4_NL:  # gguf cannot quantize to it: random codes, small f16 scales
            blocks = rng.integers(0, 256, size=(*shape[:-1], cols // 32, 18), dtype=np.uint8)
            scales = np.full(blocks.shape[:-1], 0.01, dtype=np.float16)
            blocks[..., :2] = scales[..., None].view(np.uint8)
            writer.add_tensor(name, blocks.reshape(*shape[:-1], -1), raw_dtype=qtype)
        elif qtype in _KQUANT_BLOCK:  # random blocks (gguf cannot quantize to them)
            blocks = [_random_kquant(rng, rows, cols, qtype) for _ in range(max(n, 1))]
            writer.add_tensor(name, np.stack(blocks) if n else blocks[0], raw_dtype=qtype)
        elif qtype == QT.F16:
            writer.add_tensor(name, values.astype(np.float16))
        elif qtype == QT.F32:
            writer.add_tensor(name, values.astype(np.float32))
        else:
            writer.add_tensor(name, quantize(values, qtype), raw_dtype=qtype)

    def vector(name: str, n: int, around: float = 1.0) -> None:
        writer.add_tensor(name, (around + 0.1 * rng.standard_normal(n)).astype(np.float32))

    e, kv = spec.n_embd, spec.n_head_kv * spec.head_dim
    q = spec.n_head * spec.head_dim
    out_scale = spec.output_scale
    embedding = rng.standard_normal((n_vocab, e)).astype(np.float32) / np.sqrt(e)
    if spec.tied:
        embedding *= out_scale
    route_dims = _route_dims(spec)
    if route_dims:  # see ROUTE_VALUE
        signs = rng.choice([-1.0, 1.0], size=(n_vocab, route_dims)).astype(np.float32)
        embedding[:, :route_dims] = ROUTE_VALUE * signs
    matrix("token_embd.weight", n_vocab, e, QT.Q8_0, values=embedding)
    vector("output_norm.weight", e)
    if not spec.tied:
        matrix("output.weight", n_vocab, e, QT.Q6_K if e % 256 == 0 else QT.Q8_0, out_scale)
    if spec.rope_freq_factors:
        vector("rope_freqs.weight", spec.head_dim // 2, around=2.0)
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", e)
        matrix(p + "attn_q.weight", q, e)
        matrix(p + "attn_k.weight", kv, e)
        matrix(p + "attn_v.weight", kv, e, QT.Q8_0)
        matrix(p + "attn_output.weight", e, q, spec.wo_type)
        if spec.biases:
            vector(p + "attn_q.bias", q, around=0.0)
            vector(p + "attn_k.bias", kv, around=0.0)
            vector(p + "attn_v.bias", kv, around=0.0)
        if arch == "gpt-oss":
            vector(p + "attn_output.bias", e, around=0.0)
        if spec.attn_sinks:
            vector(p + "attn_sinks.weight", spec.n_head, around=0.0)
        if spec.qk_norm:
            vector(p + "attn_q_norm.weight", spec.head_dim)
            vector(p + "attn_k_norm.weight", spec.head_dim)
        # gpt-oss names its feed-forward norm post_attention_norm
        vector(p + ("post_attention_norm.weight" if arch == "gpt-oss" else "ffn_norm.weight"), e)
        if spec.n_expert:
            _experts(spec, p, matrix, vector, rng, writer)
        else:
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


def placement_logits(path, placement, tokens: list[int], prefill: int, before_step=None):
    """Every position's logits of the model at `path` on TorchOps (the CPU) with its experts
    placed by `placement` (expert_offload.ExpertPlacement): a prefill of the first `prefill`
    tokens, then one decode step a token, before_step(model, position) called before each;
    and the model (for its counters and layers)."""
    import torch

    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.forward import Transformer
    from engine.hearth.kv_cache import TorchKVCache
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), TorchOps("cpu"),
                             experts=placement)  # fmt: skip
    n_ctx = 16
    cache = TorchKVCache(
        n_layer=config.n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=n_ctx
    )
    rows = [model.forward(torch.tensor(tokens[:prefill]), torch.arange(prefill), cache,
                          n_keys=prefill, all_logits=True)]  # fmt: skip
    for pos in range(prefill, len(tokens)):
        if before_step is not None:
            before_step(model, pos)
        step = model.forward(torch.tensor([tokens[pos]]), torch.tensor([pos]), cache, n_keys=n_ctx)
        rows.append(step[None])
    return torch.cat(rows).numpy(), model


def _route_dims(spec: TinySpec) -> int:
    """m = log2(n_expert / k): the embedding values that choose a token's experts."""
    if not spec.n_expert:
        return 0
    groups = spec.n_expert // spec.n_expert_used
    assert groups * spec.n_expert_used == spec.n_expert and groups & (groups - 1) == 0
    return groups.bit_length() - 1


def _experts(spec: TinySpec, p: str, matrix, vector, rng, writer) -> None:
    """A layer's router, experts (3-D) and shared expert. The router is scaled up so that its
    choices are clear (random logits of a tiny model would make near-ties of experts)."""
    e, n, f = spec.n_embd, spec.n_expert, spec.n_ff_exp
    router = ROUTER_NOISE * rng.standard_normal((n, e)).astype(np.float32) / np.sqrt(e)
    dims = _route_dims(spec)
    for expert in range(n):
        group = expert // spec.n_expert_used
        bits = [(group >> d) & 1 for d in range(dims)]
        router[expert, :dims] = [ROUTE_WEIGHT * (1.0 if b else -1.0) for b in bits]
    matrix(p + "ffn_gate_inp.weight", n, e, QT.F32, values=router)
    matrix(p + "ffn_gate_exps.weight", f, e, spec.expert_type, n=n)
    matrix(p + "ffn_up_exps.weight", f, e, spec.expert_type, n=n)
    matrix(p + "ffn_down_exps.weight", e, f, spec.expert_type, n=n)
    if spec.expert_biases:
        vector(p + "ffn_gate_inp.bias", n, around=0.0)
        for kind, rows in (("gate", f), ("up", f), ("down", e)):
            bias = 0.1 * rng.standard_normal((n, rows)).astype(np.float32)
            writer.add_tensor(f"{p}ffn_{kind}_exps.bias", bias)
    if spec.n_ff_shexp:
        vector(p + "ffn_gate_inp_shexp.weight", e, around=0.0)
        matrix(p + "ffn_gate_shexp.weight", spec.n_ff_shexp, e)
        matrix(p + "ffn_up_shexp.weight", spec.n_ff_shexp, e)
        matrix(p + "ffn_down_shexp.weight", e, spec.n_ff_shexp, QT.Q8_0)


def _add_vocabulary(writer: GGUFWriter, source: str) -> int:
    """Add the tokenizer.* keys of the GGUF at `source`; the number of tokens."""
    fields = _vocabulary(source)
    for key, value, kind, sub_type in fields:
        writer.add_key_value(key, value, kind, sub_type=sub_type)
    return next(len(value) for key, value, *_ in fields if key == "tokenizer.ggml.tokens")


@functools.cache
def _vocabulary(source: str) -> tuple:
    """(key, value, type, array element type) of each tokenizer.* key, read once (reading a
    50k-token vocabulary with gguf's reader takes seconds)."""
    reader = gguf.GGUFReader(source)
    fields = []
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            kind = field.types[0]
            sub_type = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            fields.append((key, field.contents(), kind, sub_type))
    return tuple(fields)


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
