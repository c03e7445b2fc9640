# Archived: a one-off measurement; its figures are in docs/speculative.md (MTP drafting costs).
"""What MTP drafting costs on a model with an MTP layer, against one plain decode step: a draft
(the MTP layer and its logits, one token), the hidden-state copy every main step now makes, and
a prompt batch with hidden states on (llama.cpp then computes every prompt token's logits).

    python benchmarks/mtp_costs.py MODEL.gguf [--threads 1]

MODEL: a GGUF with NextN layers, e.g. `testkit/synthetic_gguf.py glm4moe-mtp-tiny`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from engine.llama.driver import Context, Model
from engine.llama.mtp import MtpContext, hidden_state, keep_hidden_states
from engine.llama.params import ContextSettings, ModelSettings

DEPTH = 500  # cached tokens before the timed steps


def _median_ms(step, reps: int) -> float:
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        step()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def measure(path: str, threads: int, reps: int = 200) -> dict[str, float]:
    model = Model(ModelSettings(path=path, n_gpu_layers=0, load_mtp=True))
    settings = ContextSettings(n_ctx=1024, n_batch=512, n_threads=threads, n_outputs=512)
    ctx, mtp = Context(model, settings), MtpContext(model, settings)
    tokens = [(7 * i + 11) % model.n_vocab for i in range(512)]
    n_embd = mtp.n_embd
    try:
        ctx.decode(tokens[:DEPTH])

        def plain_step():
            ctx.decode_one(5)
            ctx.synchronize()
            ctx.forget_from(DEPTH)

        def draft():
            mtp.feed([5], DEPTH, np.zeros((1, n_embd), np.float32), logits=True)
            int(mtp.logits_of_last().argmax())
            mtp.forget_from(DEPTH)

        def prompt_batch():
            ctx.clear()
            ctx.decode(tokens)
            ctx.synchronize()

        out = {"plain step": _median_ms(plain_step, reps)}
        keep_hidden_states(ctx)
        out["plain step, hidden states on"] = _median_ms(plain_step, reps)
        ctx.decode_one(5)
        out["hidden-state copy"] = _median_ms(lambda: hidden_state(ctx, 0, n_embd), reps)
        mtp.feed(tokens[:DEPTH], 0, np.zeros((DEPTH, n_embd), np.float32), logits=False)
        out["MTP draft (one token)"] = _median_ms(draft, reps)
        keep_hidden_states(ctx, False)
        out["prompt batch of 512"] = _median_ms(prompt_batch, 10)
        keep_hidden_states(ctx)
        out["prompt batch of 512, hidden states on"] = _median_ms(prompt_batch, 10)
        return out
    finally:
        mtp.close()
        ctx.close()
        model.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    for what, ms in measure(args.model, args.threads).items():
        print(f"{what:<40} {ms:8.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
