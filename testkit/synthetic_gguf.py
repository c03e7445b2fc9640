"""GGUFs with the shapes of real models, for the tests and the benchmarks (real weights cannot
be downloaded here; memory and speed depend on shapes and types, not on the values).

Two kinds of file, both written with the `gguf` package:
- sparse (`write_sparse_gguf`): metadata and tensor infos as in the real model at a given quant,
  then the file is extended (a hole, no disk used) to where the tensor data would end. Hearth's
  reader and llama.cpp accept it; weights read as zeros. For the planner's tests and memory
  measurements (llama.cpp can load it with `no_alloc`, which is how
  tests/engine/planner/record_llama_cpu.py measured fixtures/llama_cpu_measurements.json).
- random F16 (`write_random_f16_gguf`): the same tensors with random values (windows of one
  random pool, which keeps writing fast), to quantize with llama.cpp's `llama-quantize`. For
  speed measurements, which must not run on zeros. Llama-3-8B in F16 is 16 GB (17 s on the GPU
  machine); Qwen3-30B-A3B would be 61 GB, more than that machine's disk.

    python -m testkit.synthetic_gguf llama3-8b out-f16.gguf --vocab ggml-vocab-llama-bpe.gguf
    llama-quantize out-f16.gguf out-q4_k_m.gguf Q4_K_M
    python -m testkit.synthetic_gguf gemma3-12b out.gguf --sparse Q4_K_M --vocab VOCAB
    python -m testkit.synthetic_gguf glm4moe-mtp-tiny mtp.gguf --vocab VOCAB [--predictable]

The vocabularies ship in llama.cpp's source tree (vendor/llama.cpp/models/ in llama-cpp-python's
source distribution); they are trusted inputs, read with the gguf package.

The quantization mixes follow llama-quantize's rules (src/llama-quant.cpp,
llama_tensor_get_type_impl) for the tensors these three architectures have: Q4_K_M gives
attn_v and ffn_down Q6_K on the "more bits" layers, the output (or the tied embedding) Q6_K;
Q8_0 is Q8_0 throughout. Llama-3-8B at Q4_K_M comes to 4,920,733,440 bytes here, the published
file is 4,920,734,272 (the difference is metadata).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

QT = GGMLQuantizationType


@dataclass(frozen=True)
class Shape:
    arch: str
    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    n_ctx_train: int
    tied_embeddings: bool = False
    qk_norm: bool = False
    post_norms: bool = False  # gemma: post-attention and post-ffw norms
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    sliding_window: int = 0
    rope_base: float = 10000.0
    # gpt-oss: biases on Q, K, V, the output, the router and the experts; a sink logit per
    # head; the feed-forward's norm named post_attention_norm; YaRN by `yarn_factor` from
    # `yarn_orig_ctx` positions
    gpt_oss: bool = False
    yarn_factor: float = 0.0
    yarn_orig_ctx: int = 0


SHAPES: dict[str, Shape] = {
    "llama3-8b": Shape(
        "llama", "Llama-3-8B (synthetic)", 32, 4096, 14336, 32, 8, 128, 128256, 8192,
        rope_base=500000.0,
    ),
    "llama3-70b": Shape(
        "llama", "Llama-3-70B (synthetic)", 80, 8192, 28672, 64, 8, 128, 128256, 8192,
        rope_base=500000.0,
    ),
    "gemma3-12b": Shape(
        "gemma3", "Gemma-3-12B (synthetic)", 48, 3840, 15360, 16, 8, 256, 262144, 131072,
        tied_embeddings=True, qk_norm=True, post_norms=True, sliding_window=1024,
        rope_base=1000000.0,
    ),
    "qwen3-30b-a3b": Shape(
        "qwen3moe", "Qwen3-30B-A3B (synthetic)", 48, 2048, 6144, 32, 4, 128, 151936, 40960,
        qk_norm=True, n_expert=128, n_expert_used=8, n_ff_exp=768, rope_base=1000000.0,
    ),
    # openai/gpt-oss-20b's config.json: 24 layers alternating a 128-token window with full
    # attention, 32 experts of which 4 used, YaRN 32x from 4096
    "gpt-oss-20b": Shape(
        "gpt-oss", "gpt-oss-20b (synthetic)", 24, 2880, 2880, 64, 8, 64, 201088, 131072,
        n_expert=32, n_expert_used=4, n_ff_exp=2880, sliding_window=128, rope_base=150000.0,
        gpt_oss=True, yarn_factor=32.0, yarn_orig_ctx=4096,
    ),
    # small vocabularies, so that the feed-forward and attention stages, not the logits, set the
    # compute buffer
    "mistral-7b": Shape(
        "llama", "Mistral-7B (synthetic)", 32, 4096, 14336, 32, 8, 128, 32000, 32768,
        rope_base=1000000.0,
    ),
    "mixtral-8x7b": Shape(
        "llama", "Mixtral-8x7B (synthetic)", 32, 4096, 14336, 32, 8, 128, 32000, 32768,
        n_expert=8, n_expert_used=2, n_ff_exp=14336, rope_base=1000000.0,
    ),
    "llama-tiny": Shape("llama", "tiny llama (synthetic)", 4, 256, 512, 4, 2, 64, 32000, 4096),
}  # fmt: skip

# MXFP4_MOE: the experts in MXFP4 (llama-quantize's MXFP4_MOE, gpt-oss's published format),
# every other matrix Q8_0 here (an assumption: the published files' mix of the rest may differ)
QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "MXFP4_MOE")
_BASE = {
    "Q8_0": QT.Q8_0,
    "Q6_K": QT.Q6_K,
    "Q5_K_M": QT.Q5_K,
    "Q4_K_M": QT.Q4_K,
    "Q3_K_M": QT.Q3_K,
    "MXFP4_MOE": QT.Q8_0,
}
FILE_TYPES = {
    "F32": 0,
    "F16": 1,
    "Q8_0": 7,
    "Q6_K": 18,
    "Q5_K_M": 17,
    "Q4_K_M": 15,
    "Q3_K_M": 12,
    "MXFP4_MOE": 38,
}


def _more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _weight_type(quant: str, role: str, i: int, n: int, ne0: int) -> QT:
    base = _BASE[quant]
    if role == "output":
        if ne0 % 256 != 0 or base == QT.Q8_0:
            return QT.Q8_0
        return QT.Q6_K
    if ne0 % 256 != 0 and base != QT.Q8_0:  # k-quants need whole 256-blocks: llama.cpp falls back
        return QT.Q5_0 if base in (QT.Q4_K, QT.Q3_K) else QT.Q8_0
    if role == "attn_v":
        if quant in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
            return QT.Q6_K
        if quant == "Q3_K_M":
            return QT.Q5_K if i < 2 else QT.Q4_K
    if role == "ffn_down":
        if quant in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
            return QT.Q6_K
        if quant == "Q3_K_M":
            return QT.Q5_K if i < n // 16 else QT.Q4_K
    if role == "attn_output" and quant == "Q3_K_M":
        return QT.Q4_K
    return base


def tensor_table(shape: Shape, quant: str) -> list[tuple[str, tuple[int, ...], QT]]:
    """(name, shape in ggml order (ne0 first), type) for every tensor of the model."""
    s = shape
    n = s.n_layer
    q_dim, kv_dim = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    out: list[tuple[str, tuple[int, ...], QT]] = []

    def add(name: str, ne: tuple[int, ...], role: str = "", i: int = 0, expert=False) -> None:
        if len(ne) == 1 or role in ("router", "bias"):
            out.append((name, ne, QT.F32))
        elif expert and quant == "MXFP4_MOE":
            out.append((name, ne, QT.MXFP4))
        else:
            out.append((name, ne, _weight_type(quant, role, i, n, ne[0])))

    embd_role = "output" if s.tied_embeddings else "token_embd"
    add("token_embd.weight", (s.n_embd, s.n_vocab), embd_role)
    for i in range(n):
        b = f"blk.{i}."
        add(b + "attn_norm.weight", (s.n_embd,))
        add(b + "attn_q.weight", (s.n_embd, q_dim), "attn_q", i)
        add(b + "attn_k.weight", (s.n_embd, kv_dim), "attn_k", i)
        add(b + "attn_v.weight", (s.n_embd, kv_dim), "attn_v", i)
        add(b + "attn_output.weight", (q_dim, s.n_embd), "attn_output", i)
        if s.qk_norm:
            add(b + "attn_q_norm.weight", (s.head_dim,))
            add(b + "attn_k_norm.weight", (s.head_dim,))
        if s.post_norms or s.gpt_oss:  # gpt-oss: the feed-forward's input norm
            add(b + "post_attention_norm.weight", (s.n_embd,))
        if not s.gpt_oss:
            add(b + "ffn_norm.weight", (s.n_embd,))
        if s.gpt_oss:
            add(b + "attn_q.bias", (q_dim,))
            add(b + "attn_k.bias", (kv_dim,))
            add(b + "attn_v.bias", (kv_dim,))
            add(b + "attn_output.bias", (s.n_embd,))
            add(b + "attn_sinks.weight", (s.n_head,))
            add(b + "ffn_gate_inp.bias", (s.n_expert,))
            add(b + "ffn_gate_exps.bias", (s.n_ff_exp, s.n_expert), "bias")
            add(b + "ffn_up_exps.bias", (s.n_ff_exp, s.n_expert), "bias")
            add(b + "ffn_down_exps.bias", (s.n_embd, s.n_expert), "bias")
        if s.n_expert:
            ff, e = s.n_ff_exp, s.n_expert
            add(b + "ffn_gate_inp.weight", (s.n_embd, s.n_expert), "router", i)
            # the experts take their dense namesakes' types (ffn_down's extra bits in Q4_K_M)
            add(b + "ffn_gate_exps.weight", (s.n_embd, ff, e), "ffn_gate", i, expert=True)
            add(b + "ffn_up_exps.weight", (s.n_embd, ff, e), "ffn_up", i, expert=True)
            add(b + "ffn_down_exps.weight", (ff, s.n_embd, e), "ffn_down", i, expert=True)
        else:
            add(b + "ffn_gate.weight", (s.n_embd, s.n_ff), "ffn_gate", i)
            add(b + "ffn_up.weight", (s.n_embd, s.n_ff), "ffn_up", i)
            add(b + "ffn_down.weight", (s.n_ff, s.n_embd), "ffn_down", i)
        if s.post_norms:
            add(b + "post_ffw_norm.weight", (s.n_embd,))
    add("output_norm.weight", (s.n_embd,))
    if not s.tied_embeddings:
        add("output.weight", (s.n_embd, s.n_vocab), "output")
    return out


def n_bytes(ggml_type: QT, ne: tuple[int, ...]) -> int:
    block, size = GGML_QUANT_SIZES[ggml_type]
    return int(np.prod(ne)) // block * size


def add_hyperparameters(writer: GGUFWriter, shape, n_ctx_train: int, rope_base: float) -> None:
    """The keys every architecture's loader reads (layers, widths, heads, RoPE, the norm's
    epsilon, experts), from `shape`: a Shape, or any object with the same fields."""
    s = shape
    writer.add_block_count(s.n_layer)
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(s.n_embd)
    writer.add_feed_forward_length(s.n_ff)
    writer.add_head_count(s.n_head)
    writer.add_head_count_kv(s.n_head_kv)
    writer.add_key_length(s.head_dim)
    writer.add_value_length(s.head_dim)
    writer.add_rope_dimension_count(s.head_dim)
    writer.add_rope_freq_base(rope_base)
    writer.add_layer_norm_rms_eps(1e-6)
    if s.n_expert:
        writer.add_expert_count(s.n_expert)
        writer.add_expert_used_count(s.n_expert_used)
        writer.add_expert_feed_forward_length(s.n_ff_exp)


def _metadata(writer: GGUFWriter, shape: Shape, quant: str, with_vocab: bool) -> None:
    s = shape
    writer.add_name(s.name)
    add_hyperparameters(writer, s, s.n_ctx_train, s.rope_base)
    writer.add_file_type(FILE_TYPES[quant])
    if not with_vocab:
        writer.add_vocab_size(s.n_vocab)
    if s.sliding_window:
        writer.add_sliding_window(s.sliding_window)
    if s.yarn_factor:
        from gguf import RopeScalingType

        writer.add_rope_scaling_type(RopeScalingType.YARN)
        writer.add_rope_scaling_factor(s.yarn_factor)
        writer.add_rope_scaling_orig_ctx_len(s.yarn_orig_ctx)


def write_sparse_gguf(
    path: str | os.PathLike[str], shape: Shape, quant: str, vocab: str | None = None
) -> Path:
    """Write the header of `shape` at `quant`; the data section is a hole of the right size.

    `vocab` is a llama.cpp vocabulary GGUF (vendor/llama.cpp/models/ggml-vocab-*.gguf) to copy,
    needed only when llama.cpp itself will load the file.
    """
    writer = GGUFWriter(os.fspath(path), shape.arch)
    _metadata(writer, shape, quant, with_vocab=vocab is not None)
    if vocab is not None:
        _copy_vocab(writer, vocab)
    for name, ne, ggml_type in tensor_table(shape, quant):
        numpy_shape = tuple(reversed(ne))
        nbytes = n_bytes(ggml_type, ne)
        writer.add_tensor_info(name, numpy_shape, np.dtype(np.float32), nbytes, raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    out = writer.fout[0]
    writer.write_padding(out, out.tell())
    data_size = 0
    for info in writer.tensors[0].values():
        data_size += info.nbytes
        data_size += (-data_size) % writer.data_alignment
    out.truncate(out.tell() + data_size)
    writer.close()
    return Path(path)


def _copy_vocab(writer: GGUFWriter, vocab_path: str) -> None:
    from gguf import GGUFReader

    fields = GGUFReader(vocab_path).fields
    writer.add_tokenizer_model(fields["tokenizer.ggml.model"].contents())
    if "tokenizer.ggml.pre" in fields:
        writer.add_tokenizer_pre(fields["tokenizer.ggml.pre"].contents())
    writer.add_token_list(fields["tokenizer.ggml.tokens"].contents())
    writer.add_token_types(fields["tokenizer.ggml.token_type"].contents())
    if "tokenizer.ggml.scores" in fields:
        writer.add_token_scores(fields["tokenizer.ggml.scores"].contents())
    if "tokenizer.ggml.merges" in fields:
        writer.add_token_merges(fields["tokenizer.ggml.merges"].contents())
    for key, add in (
        ("tokenizer.ggml.bos_token_id", writer.add_bos_token_id),
        ("tokenizer.ggml.eos_token_id", writer.add_eos_token_id),
    ):
        if key in fields:
            add(fields[key].contents())


def write_random_f16_gguf(
    path: str | os.PathLike[str], shape: Shape, vocab: str, seed: int = 0
) -> Path:
    """Every tensor of `shape` in F16 (norms in F32) with random values, ready to quantize.
    The embedding and output take the vocabulary's own size, so llama.cpp accepts the file."""
    from dataclasses import replace

    from gguf import GGUFReader

    n_tokens = len(GGUFReader(vocab).fields["tokenizer.ggml.tokens"].data)
    shape = replace(shape, n_vocab=n_tokens)
    writer = GGUFWriter(os.fspath(path), shape.arch)
    _metadata(writer, shape, "F16", with_vocab=True)
    _copy_vocab(writer, vocab)
    table = tensor_table(shape, "Q8_0")  # the names and shapes; the types are chosen here
    largest = max(int(np.prod(ne)) for _, ne, _ in table)
    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(largest + 4099, dtype=np.float32) * 0.02).astype(np.float16)
    for index, (name, ne, ggml_type) in enumerate(table):
        numpy_shape = tuple(reversed(ne))
        if ggml_type == QT.F32:  # norms (and sinks) ones, biases zeros
            fill = np.zeros if name.endswith(".bias") else np.ones
            writer.add_tensor(name, fill(numpy_shape, dtype=np.float32))
            continue
        start = (index * 4093) % 4096  # a different window of the pool for each tensor
        writer.add_tensor(name, pool[start : start + int(np.prod(ne))].reshape(numpy_shape))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return Path(path)


# A model whose GGUF carries an MTP (NextN) layer, for MTP drafting (docs/speculative.md). Of the
# architectures the vendored llama.cpp drafts MTP for, glm4moe (GLM-4.5) has the fewest tensor
# kinds and no recurrent state: grouped-query attention, mixture-of-experts feed-forward with one
# shared expert, and a NextN block (eh_proj, enorm, hnorm) appended after the trunk, whose
# feed-forward must be MoE too (src/models/glm4-moe.cpp asserts ffn_gate_inp there).
MTP_TINY = Shape(
    "glm4moe", "GLM-4.5-shaped MTP (synthetic)", 2, 64, 128, 4, 2, 16, 0, 4096,
    tied_embeddings=True, n_expert=4, n_expert_used=2, n_ff_exp=32,
)  # fmt: skip
MTP_LAYERS = 1
MTP_NAME = "glm4moe-mtp-tiny"  # its name on the command line


def mtp_tensor_table(shape: Shape, n_mtp: int) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape in ggml order) of a glm4moe model with `n_mtp` NextN layers after its
    `shape.n_layer` trunk layers (every layer MoE, one shared expert, tied output)."""
    s = shape
    q_dim, kv_dim = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    out = [("token_embd.weight", (s.n_embd, s.n_vocab)), ("output_norm.weight", (s.n_embd,))]
    for i in range(s.n_layer + n_mtp):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (s.n_embd,)),
            (b + "attn_q.weight", (s.n_embd, q_dim)),
            (b + "attn_k.weight", (s.n_embd, kv_dim)),
            (b + "attn_v.weight", (s.n_embd, kv_dim)),
            (b + "attn_output.weight", (q_dim, s.n_embd)),
            (b + "post_attention_norm.weight", (s.n_embd,)),
            (b + "ffn_gate_inp.weight", (s.n_embd, s.n_expert)),
            (b + "exp_probs_b.bias", (s.n_expert,)),
            (b + "ffn_gate_exps.weight", (s.n_embd, s.n_ff_exp, s.n_expert)),
            (b + "ffn_up_exps.weight", (s.n_embd, s.n_ff_exp, s.n_expert)),
            (b + "ffn_down_exps.weight", (s.n_ff_exp, s.n_embd, s.n_expert)),
            (b + "ffn_gate_shexp.weight", (s.n_embd, s.n_ff_exp)),
            (b + "ffn_up_shexp.weight", (s.n_embd, s.n_ff_exp)),
            (b + "ffn_down_shexp.weight", (s.n_ff_exp, s.n_embd)),
        ]
        if i >= s.n_layer:
            out += [
                (b + "nextn.eh_proj.weight", (2 * s.n_embd, s.n_embd)),
                (b + "nextn.enorm.weight", (s.n_embd,)),
                (b + "nextn.hnorm.weight", (s.n_embd,)),
            ]
    return out


def write_mtp_gguf(
    path: str | os.PathLike[str],
    vocab: str | os.PathLike[str],
    shape: Shape = MTP_TINY,
    n_mtp: int = MTP_LAYERS,
    seed: int = 0,
    *,
    predictable: bool = False,
    mtp_weights: bool = True,
) -> Path:
    """A glm4moe model with NextN layer(s) and random F32 weights, and the tokenizer of
    `vocab` (any GGUF that has one: a llama.cpp ggml-vocab-*.gguf, or the starter model).

    Random weights are drawn at a scale that keeps a token's logits apart (greedy decoding does
    not sit on near-ties); norms are ones and biases zeros, as in a fresh model. Its MTP layer
    guesses the trunk's next token no better than chance.

    `predictable`: the same tensors set so that the MTP layer knows what the trunk will say, as
    a trained head would (mostly): attention and feed-forward outputs are zero, so the trunk's
    state is the token's embedding and it always answers f(token) for a fixed permutation f of
    the vocabulary (an untied output whose row f(t) is t's embedding); the NextN block's
    eh_proj keeps the token half of its input, so it answers f of its token too. Every draft is
    then kept: for the mechanics of a kept draft and the speed of drafting at full acceptance.

    `mtp_weights=False`: the NextN layers declared, their tensors left out (as some conversions
    do; llama.cpp loads such a file and aborts when asked for an MTP context).
    """
    from dataclasses import replace

    from gguf import ExpertGatingFuncType, GGUFReader

    n_tokens = len(GGUFReader(os.fspath(vocab)).fields["tokenizer.ggml.tokens"].data)
    shape = replace(shape, n_vocab=n_tokens, tied_embeddings=not predictable)
    writer = GGUFWriter(os.fspath(path), shape.arch)
    # block_count counts the trunk and the NextN layers; the last n_mtp blocks are NextN
    _metadata(writer, replace(shape, n_layer=shape.n_layer + n_mtp), "F32", with_vocab=True)
    writer.add_nextn_predict_layers(n_mtp)
    writer.add_expert_shared_count(1)
    writer.add_leading_dense_block_count(0)
    writer.add_expert_weights_norm(True)
    writer.add_expert_weights_scale(1.0)
    writer.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)  # as GLM-4.5
    _copy_vocab(writer, os.fspath(vocab))
    rng = np.random.default_rng(seed)
    table = mtp_tensor_table(shape, n_mtp)
    if not mtp_weights:
        nextn = tuple(f"blk.{i}." for i in range(shape.n_layer, shape.n_layer + n_mtp))
        table = [(name, ne) for name, ne in table if not name.startswith(nextn)]
    if predictable:
        table.append(("output.weight", (shape.n_embd, shape.n_vocab)))
    values: dict[str, np.ndarray] = {}
    for name, ne in table:
        numpy_shape = tuple(reversed(ne))
        if name.endswith(".bias"):
            values[name] = np.zeros(numpy_shape, dtype=np.float32)
        elif len(ne) == 1:
            values[name] = np.ones(numpy_shape, dtype=np.float32)
        else:
            scale = 1.0 if name == "token_embd.weight" else float(ne[0]) ** -0.5
            values[name] = rng.standard_normal(numpy_shape, dtype=np.float32) * scale
    if predictable:
        _make_predictable(values, shape, rng)
    for name, _ in table:
        writer.add_tensor(name, values[name])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return Path(path)


def _make_predictable(values: dict[str, np.ndarray], shape: Shape, rng) -> None:
    """write_mtp_gguf(predictable=True)'s weights (its docstring says what they do)."""
    follows = rng.permutation(shape.n_vocab)  # f: token t is followed by follows[t]
    output = np.empty_like(values["token_embd.weight"])
    output[follows] = values["token_embd.weight"]  # row f(t) scores highest for t's state
    values["output.weight"] = output
    for name, array in values.items():
        if name.endswith(("attn_output.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight")):
            array[...] = 0.0  # no block adds to the residual stream
        elif name.endswith("nextn.eh_proj.weight"):
            # numpy shape (n_embd, 2 n_embd); its input is [normed token embedding, normed state]
            array[...] = np.hstack(
                [np.eye(shape.n_embd, dtype=np.float32), np.zeros((shape.n_embd,) * 2, np.float32)]
            )


def main(argv: list[str] | None = None) -> int:
    import argparse
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=[*sorted(SHAPES), MTP_NAME])
    parser.add_argument("out")
    parser.add_argument("--vocab", help="a llama.cpp ggml-vocab-*.gguf to copy")
    parser.add_argument(
        "--sparse", choices=QUANTS, metavar="QUANT", help="header only, at this quant"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--predictable", action="store_true", help=f"{MTP_NAME}: an MTP layer that is always right"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.shape == MTP_NAME:
        if not args.vocab or args.sparse:
            parser.error(f"{MTP_NAME} needs --vocab (any GGUF with a tokenizer) and no --sparse")
        write_mtp_gguf(args.out, args.vocab, seed=args.seed, predictable=args.predictable)
    elif args.sparse:
        write_sparse_gguf(args.out, SHAPES[args.shape], args.sparse, args.vocab)
    elif not args.vocab:
        parser.error("--vocab is needed for a file with weights")
    else:
        write_random_f16_gguf(args.out, SHAPES[args.shape], args.vocab, args.seed)
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
