"""llama.cpp's load time and time to first token, through the bare C API (llama-bench reports
neither), for benchmarks/hearth_speed.py to set beside the Hearth engine's.

    python -m benchmarks.llama_ttft MODEL.gguf     # prints one JSON line

- load_s: llama_model_load_from_file with every layer on the GPU (the file already in the page
  cache: the caller has read it), the second of two loads;
- ttft_512_ms: a 512-token prompt in one llama_decode (flash attention on, n_ubatch 512) and
  the argmax of its last logits on the host, median of 4 after one warm-up.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import statistics
import sys
import time


def main() -> int:
    # llama.cpp's libraries must load before numpy is imported: on the GPU machine (CUDA build,
    # Python 3.12, numpy 2) a model load after numpy came first crashed with SIGSEGV inside
    # llama_model_load_from_file (docs/backends.md; engine/runtime/logit_trace.py). The
    # llama_cpp package loads them, then imports numpy itself; nothing here imports it before.
    import llama_cpp.llama_cpp as C

    path = os.fsencode(sys.argv[1])
    C.llama_backend_init()
    params = C.llama_model_default_params()
    params.n_gpu_layers = 999
    loads = []
    model = None
    for _ in range(2):
        if model is not None:
            C.llama_model_free(model)
        started = time.perf_counter()
        model = C.llama_model_load_from_file(path, params)
        loads.append(time.perf_counter() - started)
    import numpy as np

    n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(model))
    cp = C.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 1024, 512, 512
    cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
    ctx = C.llama_init_from_model(model, cp)
    mem = C.llama_get_memory(ctx)
    rng = random.Random(0)
    times = []
    for _ in range(5):
        tokens = (C.llama_token * 512)(*(rng.randrange(n_vocab) for _ in range(512)))
        C.llama_memory_clear(mem, True)
        C.llama_synchronize(ctx)
        started = time.perf_counter()
        C.llama_decode(ctx, C.llama_batch_get_one(tokens, 512))
        logits = C.llama_get_logits_ith(ctx, -1)
        row = np.ctypeslib.as_array(ctypes.cast(logits, ctypes.POINTER(ctypes.c_float)), (n_vocab,))
        int(np.argmax(row))
        times.append(time.perf_counter() - started)
    print(json.dumps({"load_s": loads[-1], "ttft_512_ms": statistics.median(times[1:]) * 1e3}))
    C.llama_free(ctx)
    C.llama_model_free(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
