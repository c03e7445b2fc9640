"""Mixture-of-experts GGUFs with random blocks, for the CPU experts' tests and benchmark
(engine/hearth/cpu_experts.py, benchmarks/cpu_experts.py):

- `write_experts_gguf`: a model's hyperparameters and only its layers' routed-expert tensors
  (gate, up, down, and gpt-oss's expert biases), of chosen block types; enough for
  cpu_experts.gguf_experts, not for llama.cpp.
- `write_random_moe_gguf`: every tensor of a testkit.synthetic_gguf Shape at a quant, written
  directly as random valid blocks (no F16 file, no llama-quantize), with the tokenizer of any
  GGUF that has one: a model llama.cpp loads and decodes, at the real shapes' speed.

Random blocks come from kernels/moe_reference.random_expert_bytes (small finite scales; MXFP4
exponents of 2^-9 .. 2^-3), norms are ones and biases small random values.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

from kernels.moe_reference import random_expert_bytes
from testkit.synthetic_gguf import (
    Shape,
    _copy_vocab,
    _metadata,
    add_hyperparameters,
    tensor_table,
)

QT = GGMLQuantizationType
ROLES = ("gate", "up", "down")


def expert_shapes(shape: Shape) -> dict[str, tuple[int, int, int]]:
    """[n_expert, n_out, n_in] of each role's expert tensor."""
    e, ff, d = shape.n_expert, shape.n_ff_exp, shape.n_embd
    return {"gate": (e, ff, d), "up": (e, ff, d), "down": (e, d, ff)}


def write_experts_gguf(
    path: str | os.PathLike[str],
    shape: Shape,
    n_layer: int,
    types: dict[str, str],
    *,
    biases: bool = False,
    seed: int = 0,
) -> Path:
    """`n_layer` layers of `shape`'s routed experts: blk.i.ffn_{gate,up,down}_exps.weight
    of the block types `types` names per role ("Q4_K", ...), and with `biases` their float32
    biases blk.i.ffn_{role}_exps.bias [n_expert, n_out]; layer i's tensors are drawn from
    seed + 10 i + the role's index."""
    writer = GGUFWriter(os.fspath(path), shape.arch)
    writer.add_name(f"{shape.name}: experts only")
    add_hyperparameters(writer, replace(shape, n_layer=n_layer), shape.n_ctx_train, 1e4)
    shapes = expert_shapes(shape)
    for i in range(n_layer):
        for r, role in enumerate(ROLES):
            fmt = types[role]
            n_expert, n_out, n_in = shapes[role]
            raw = random_expert_bytes(fmt, n_expert, n_out, n_in, seed + 10 * i + r)
            writer.add_tensor(
                f"blk.{i}.ffn_{role}_exps.weight",
                raw.reshape(n_expert, n_out, -1),
                raw_dtype=QT[fmt],
            )
            if biases:
                rng = np.random.default_rng(seed + 10 * i + r + 5)
                bias = (rng.standard_normal((n_expert, n_out)) * 0.1).astype(np.float32)
                writer.add_tensor(f"blk.{i}.ffn_{role}_exps.bias", bias)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return Path(path)


def write_random_moe_gguf(
    path: str | os.PathLike[str],
    shape: Shape,
    quant: str,
    vocab: str | os.PathLike[str],
    seed: int = 0,
) -> Path:
    """Every tensor of `shape` (testkit.synthetic_gguf.tensor_table at `quant`) as random
    blocks of its type, norms ones, biases small; the tokenizer copied from `vocab`, whose
    token count sets the embedding's and output's rows."""
    from gguf import GGUFReader

    n_tokens = len(GGUFReader(os.fspath(vocab)).fields["tokenizer.ggml.tokens"].data)
    shape = replace(shape, n_vocab=n_tokens)
    writer = GGUFWriter(os.fspath(path), shape.arch)
    _metadata(writer, shape, quant, with_vocab=True)
    _copy_vocab(writer, os.fspath(vocab))
    rng = np.random.default_rng(seed)
    for index, (name, ne, ggml_type) in enumerate(tensor_table(shape, quant)):
        numpy_shape = tuple(reversed(ne))
        if ggml_type == QT.F32:
            if name.endswith(".bias"):
                values = (rng.standard_normal(numpy_shape) * 0.01).astype(np.float32)
            else:
                values = np.ones(numpy_shape, dtype=np.float32)
            writer.add_tensor(name, values)
            continue
        n_in = ne[0]
        n_rows = int(np.prod(ne[1:]))
        raw = random_expert_bytes(ggml_type.name, 1, n_rows, n_in, seed + index)
        writer.add_tensor(name, raw.reshape(*numpy_shape[:-1], -1), raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return Path(path)
