"""A GGUF of a real model's shape at a quant's tensor types (Q4_K_M by default; MXFP4_MOE for
gpt-oss), filled with random valid blocks.

For measuring speed where llama.cpp's `llama-quantize` is not at hand (it needs a llama.cpp
build, about 3 minutes on the GPU machine): testkit/synthetic_gguf.py writes the header and
leaves the data a hole; this fills every tensor with random quant bytes and small finite f16
scales (kernels.reference.random_weight_bytes makes the blocks), norm vectors with ones. The
values are not a trained model's, so only speed can be measured on it, never quality; the
blocks are windows of one random pool per type, which keeps writing 4.9 GB fast.
"""

from __future__ import annotations

import time

import numpy as np

from engine.gguf import read_model_info
from kernels.ggml_formats import block_format
from kernels.reference import random_weight_bytes
from testkit.synthetic_gguf import SHAPES, Shape, write_sparse_gguf

_POOL_BLOCKS = 1 << 16
# MXFP4's scale is 2^(e - 127) (ggml's E8M0): 117..120 are 2^-10..2^-7
MXFP4_EXPONENT_LOW = 117


def write_random_quantized(
    path: str, shape: str | Shape, quant: str = "Q4_K_M", vocab: str | None = None
) -> float:
    """Write the file; returns the seconds it took. `shape`: a name in SHAPES, or a Shape of
    one's own (benchmarks/moe_launches.py's small ones). `vocab`: a llama.cpp ggml-vocab-*.gguf
    to copy, so that llama.cpp can load the file too (the table then takes its token count)."""
    started = time.perf_counter()
    model_shape = SHAPES[shape] if isinstance(shape, str) else shape
    if vocab is not None:
        from dataclasses import replace

        from gguf import GGUFReader

        n_tokens = len(GGUFReader(vocab).fields["tokenizer.ggml.tokens"].data)
        model_shape = replace(model_shape, n_vocab=n_tokens)
    write_sparse_gguf(path, model_shape, quant, vocab)
    info = read_model_info(path)
    pools: dict[int, np.ndarray] = {}
    with open(path, "r+b") as f:
        for index, t in enumerate(info.tensors):
            f.seek(info.data_offset + t.offset)
            if t.ggml_type == 0 and len(t.shape) == 1:  # F32 norm weights
                f.write(np.ones(t.shape[0], dtype=np.float32).tobytes())
                continue
            fmt = block_format(t.ggml_type)
            pool = pools.get(t.ggml_type)
            if pool is None:
                raw = random_weight_bytes(fmt.name, 1, _POOL_BLOCKS * fmt.block_size, seed=7)
                pool = pools[t.ggml_type] = _small_scales(raw.reshape(_POOL_BLOCKS, -1), fmt)
            n_blocks = t.n_bytes // fmt.type_size
            shift = (index * 4099) % _POOL_BLOCKS  # a different window for each tensor
            done = 0
            while done < n_blocks:
                take = min(n_blocks - done, _POOL_BLOCKS - shift)
                f.write(pool[shift : shift + take].tobytes())
                done += take
                shift = 0
    return time.perf_counter() - started


def _small_scales(blocks: np.ndarray, fmt) -> np.ndarray:
    """The blocks with their f16 scales divided by 64: weights of about 0.1 at most, as a
    trained model's are, so activations stay finite through 32 layers (0.01-sized scales
    times 6-bit sub-scales times 4-bit codes made weights up to about 10). MXFP4's E8M0
    exponent byte (random: scales up to 2^127) becomes 2^-10..2^-7, E2M1 values being at most
    6: weights under 0.05."""
    for name, offset, length, dtype in fmt.fields:
        if dtype == "float16":
            field = blocks[:, offset : offset + length].copy().view(np.float16)
            blocks[:, offset : offset + length] = (field / 64).view(np.uint8)
        elif fmt.name == "MXFP4" and name == "e":
            blocks[:, offset] = MXFP4_EXPONENT_LOW + blocks[:, offset] % 4
    return blocks
