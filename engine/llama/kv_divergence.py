"""How far a K/V cache type moves a model's next-token distributions from the f16 cache's, on
llama.cpp's CPU build: the measurement behind the built-in KV check (engine/session/kv_quality.py).

    llama_kv_divergence(path, tokens, [("q8_0", "q8_0"), ("q4_0", "q4_0")])
        -> {("f16", "f16"): Divergence(0.0, 1.0, n), ("q8_0", "q8_0"): Divergence(...), ...}

One context per cache type over the same weights, fed the same chunks in lockstep, every
position's logits kept (n_outputs_max = the chunk): each chunk's log-probabilities are compared
with the f16 context's at once, so no more than one chunk of logits is held per type.

    KL      mean over positions of KL(p_f16 || p_type), in nats
    top-1   share of positions whose most likely next token is the f16 cache's
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llama_cpp.llama_cpp as C
import numpy as np

from engine.hardware.cpu_probe import physical_cores
from engine.llama.divergence import Divergence, DivergenceSum, log_softmax
from engine.llama.driver import FLASH_ATTN, KV_TYPES, EngineError
from engine.llama.params import ModelSettings

Pair = tuple[str, str]
F16: Pair = ("f16", "f16")


def llama_kv_divergence(
    path: str, tokens: Sequence[int], pairs: Sequence[Pair], *, chunk: int = 128, threads: int = 0
) -> dict[Pair, Divergence]:
    """Each pair's divergence from f16 over `tokens`, on the CPU (every layer in host memory,
    flash attention on: llama.cpp needs it for a quantized V cache)."""
    from engine.llama.driver import Model

    wanted = [F16, *[p for p in pairs if p != F16]]
    model = Model(ModelSettings(path=path, n_gpu_layers=0))
    contexts: dict[Pair, object] = {}
    batch = C.llama_batch_init(chunk, 0, 1)
    try:
        for type_k, type_v in wanted:
            cp = C.llama_context_default_params()
            cp.n_ctx = len(tokens) + chunk
            cp.n_batch = cp.n_ubatch = cp.n_outputs_max = chunk
            cp.n_threads = cp.n_threads_batch = threads or physical_cores()
            cp.flash_attn_type = FLASH_ATTN["on"]
            cp.type_k, cp.type_v = KV_TYPES[type_k], KV_TYPES[type_v]
            handle = C.llama_init_from_model(model.handle, cp)
            if not handle:
                raise EngineError(f"llama.cpp could not make a K {type_k} / V {type_v} context.")
            contexts[(type_k, type_v)] = handle
        sums = {pair: DivergenceSum() for pair in wanted}
        n_vocab = model.n_vocab
        for start in range(0, len(tokens), chunk):
            ids = tokens[start : start + chunk]
            batch.n_tokens = len(ids)
            for i, token in enumerate(ids):
                batch.token[i], batch.pos[i] = token, start + i
                batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = 1, 0, 1
            base = None
            for pair, handle in contexts.items():
                if C.llama_decode(handle, batch) != 0:
                    raise EngineError(f"llama.cpp failed to decode with a {pair} cache.")
                pointer = ctypes.cast(C.llama_get_logits(handle), ctypes.POINTER(ctypes.c_float))
                logp = log_softmax(np.ctypeslib.as_array(pointer, shape=(len(ids), n_vocab)))
                base = logp if base is None else base  # f16 comes first
                sums[pair].add(logp, base)
        return {pair: s.result() for pair, s in sums.items()}
    finally:
        C.llama_batch_free(batch)
        for handle in contexts.values():
            C.llama_free(handle)
        model.close()
