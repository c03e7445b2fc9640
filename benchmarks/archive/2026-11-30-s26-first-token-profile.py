"""Session 26: where the Hearth engine's first token after a load goes (0.87 s warm in call 5,
against about 0.02 s for a token once the kernels are loaded): cProfile of the cache and the
first one-token forward in a fresh process, the weights already loaded, the Triton cache warm.

    python benchmarks/archive/2026-11-30-s26-first-token-profile.py MODEL.gguf OUT.txt
"""

import cProfile
import io
import pstats
import sys
import time

import torch

import kernels  # noqa: F401
from benchmarks.hearth_speed import new_cache
from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.ops import select_ops
from engine.hearth.weights import GGUFTensors

model, out_path = sys.argv[1], sys.argv[2]
lines = []
with torch.inference_mode():
    torch.zeros(1, device="cuda")
    info = read_model_info(model)
    loaded = Transformer.load(model_config(info), GGUFTensors(model, info), select_ops("cuda"))
    torch.cuda.synchronize()
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    cache = new_cache(loaded, "paged-f16", 4096)
    made = time.perf_counter()
    one = torch.tensor([1], device="cuda")
    logits = loaded.forward(one, torch.zeros_like(one), cache, n_keys=cache.n_ctx)
    int(torch.argmax(logits))
    profile.disable()
    done = time.perf_counter()
    for attempt in range(3):
        again = time.perf_counter()
        logits = loaded.forward(one, torch.ones_like(one) + attempt, cache, n_keys=cache.n_ctx)
        int(torch.argmax(logits))
        lines.append(f"token {attempt + 2}: {time.perf_counter() - again:.4f} s")
lines.insert(0, f"cache {made - started:.3f} s, first token {done - made:.3f} s")
text = io.StringIO()
pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(45)
pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
with open(out_path, "w") as f:
    f.write("\n".join(lines) + "\n" + text.getvalue())
print("\n".join(lines))
