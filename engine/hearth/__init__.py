"""The Hearth engine: GGUF models run by Hearth's own forward pass in torch (kernels/ on a GPU).

A second engine behind the worker protocol, beside llama.cpp (engine/llama/driver.py):
the weights stay quantized as the file stores them, the forward pass is engine/hearth/forward.py
over the operations of engine/hearth/ops.py, the KV cache is preallocated. llama.cpp still
provides the tokenizer and chat template (a vocabulary-only load), so both engines see the same
tokens.

torch is optional: without it, or for an architecture this engine does not run, the worker
loads the model with llama.cpp and says why in one line (`unavailable_reason`).

    config.py      ModelConfig from the GGUF header (pure)
    weights.py     the file's tensors, memory-mapped, blocks as stored
    ops.py         the seam: matmul, norms, RoPE, activation, experts (plain torch / kernels)
    routing.py     a mixture-of-experts router: each token's experts and weights
    kv_cache.py    a preallocated cache and attention over it
    forward.py     the decoder
    reference.py   a plain-torch forward pass without cache, written once, for the tests
    sampler.py     llama.cpp's sampler chain in torch

The worker's side is engine/runtime/hearth_driver.py (Model / Context / Sampler with the
llama.cpp driver's interface) and engine/runtime/hearth_trace.py (logit traces for the
near-tie check); this package imports nothing from engine.runtime.
"""

from __future__ import annotations

import importlib.util


def torch_missing_reason() -> str | None:
    """Why torch cannot be used here, or None when it can."""
    if importlib.util.find_spec("torch") is None:
        return (
            "PyTorch is not installed; install Hearth with its kernels extra: "
            "pip install 'hearth[kernels]'"
        )
    return None
