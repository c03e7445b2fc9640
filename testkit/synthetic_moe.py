"""Mixture-of-experts GGUFs of routed experts only, with random blocks, for the CPU experts'
tests and benchmark (engine/hearth/cpu_experts.py, benchmarks/cpu_experts.py): a model's
hyperparameters and its layers' gate, up and down expert tensors (and gpt-oss's expert biases)
of chosen block types; enough for cpu_experts.gguf_experts, not for llama.cpp (a whole model
of random blocks: benchmarks/hearth_speed_files.py). The blocks come from
kernels/moe_reference.random_expert_bytes (small finite scales; MXFP4 exponents of 2^-9 ..
2^-3).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

from kernels.moe_reference import random_expert_bytes
from testkit.synthetic_gguf import Shape, add_hyperparameters

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
