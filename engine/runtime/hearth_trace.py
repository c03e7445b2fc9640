"""A logit trace of the Hearth engine, in engine/runtime/logit_trace.py's format.

So that engine/runtime/greedy_check.py judges the Hearth engine by the same near-tie rule as a
GPU build of llama.cpp: a greedy trace (or one forced on a reference's tokens, watching the
reference's top-k ids) of `n_tokens` steps after `prompt`, computed the way the worker computes
them (prompt in one batch with BOS, then one token per decode step over the whole cache).

    python -m engine.runtime.hearth_trace MODEL --prompt TEXT [--tokens 32] [--forced TRACE.json]
        [--watch TRACE.json] [--top-k 5] [--save-logits LOGITS.npy]

Runs on HEARTH_ENGINE_DEVICE, or the GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path


def trace(
    model_path: str,
    prompt: str,
    n_tokens: int,
    *,
    forced: list[int] | None = None,
    watch: list[list[int]] | None = None,
    top_k: int = 5,
    n_ctx: int = 1024,
    n_threads: int = 0,
    save_logits: Path | None = None,
) -> dict:
    """See the module docstring; `save_logits` also writes every step's logits (.npy)."""

    from engine.runtime.hearth_driver import HearthModel
    from engine.runtime.logit_trace import trace_continuation
    from engine.runtime.protocol import ModelParams

    if forced is not None and len(forced) < n_tokens:
        raise ValueError(f"{len(forced)} forced tokens for {n_tokens} steps")
    params = ModelParams(path=model_path, n_ctx=n_ctx, n_threads=n_threads, engine="hearth")
    model = HearthModel(params)
    ctx = model.new_context(params)
    try:
        ctx.warm_up()
        prompt_tokens = model.tokenize(prompt, add_special=True)
        out = ctx.decode(prompt_tokens)
        continuation = trace_continuation(
            ctx,
            model,
            prompt_tokens,
            out,
            lambda step: step.logits.float().cpu().numpy(),
            n_tokens,
            forced=forced,
            watch=watch,
            top_k=top_k,
            save_logits=save_logits,
        )
        return {
            "model": Path(model_path).name,
            "prompt": prompt,
            "engine": "hearth",
            "device": model.hearth.device,
            **continuation,
        }
    finally:
        ctx.close()
        model.close()


def main(argv: list[str] | None = None) -> int:
    from engine.runtime.logit_trace import print_trace, trace_parser

    parser = trace_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=0, help="CPU threads; 0: all cores")
    args = parser.parse_args(argv)
    return print_trace(trace, args, n_threads=args.threads)


if __name__ == "__main__":
    sys.exit(main())
