"""Diagnose a prefill gap: time one 512-token llama_decode through the bare C API while varying
one setting at a time (context size, threads, sampler attached), beside Hearth's own path.

    python benchmarks/diag_prefill.py MODEL.gguf
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

import llama_cpp.llama_cpp as C


def main() -> int:
    path = sys.argv[1]
    C.llama_backend_init()
    mp = C.llama_model_default_params()
    mp.n_gpu_layers = 999
    model = C.llama_model_load_from_file(os.fsencode(path), mp)
    n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(model))
    rng = random.Random(0)
    variants = [
        ("n_ctx 512, default threads", 512, None, False),
        ("n_ctx 8448, default threads", 8448, None, False),
        ("n_ctx 8448, threads 8", 8448, 8, False),
        ("n_ctx 8448, threads 16", 8448, 16, False),
        ("n_ctx 8448, greedy sampler attached", 8448, None, True),
    ]
    for label, n_ctx, threads, sampler in variants:
        cp = C.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = min(2048, n_ctx)
        cp.n_ubatch = 512
        cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
        if threads:
            cp.n_threads = cp.n_threads_batch = threads
        ctx = C.llama_init_from_model(model, cp)
        chain = None
        if sampler:
            chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_greedy())
            C.llama_set_sampler(ctx, 0, chain)
        mem = C.llama_get_memory(ctx)
        rates = []
        for _ in range(8):
            tokens = (C.llama_token * 512)(*(rng.randrange(n_vocab) for _ in range(512)))
            C.llama_memory_clear(mem, True)
            C.llama_synchronize(ctx)
            started = time.perf_counter()
            C.llama_decode(ctx, C.llama_batch_get_one(tokens, 512))
            C.llama_synchronize(ctx)
            rates.append(512 / (time.perf_counter() - started))
        print(
            f"{label:40s} median {statistics.median(rates[2:]):8.0f} tok/s  all "
            + " ".join(f"{r:.0f}" for r in rates),
            flush=True,
        )
        if chain:
            C.llama_set_sampler(ctx, 0, None)
            C.llama_sampler_free(chain)
        C.llama_free(ctx)
    print("default threads:", C.llama_context_default_params().n_threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
