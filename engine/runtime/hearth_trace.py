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

import argparse
import json
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
    from engine.runtime.logit_trace import trace_steps
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
        steps, tokens = trace_steps(
            ctx,
            model,
            out,
            lambda step: step.logits.float().cpu().numpy(),
            n_tokens,
            forced=forced,
            watch=watch,
            top_k=top_k,
            save_logits=save_logits,
        )
        text = b"".join(model.token_bytes(t) for t in tokens).decode("utf-8", "replace")
        return {
            "model": Path(model_path).name,
            "prompt": prompt,
            "engine": "hearth",
            "device": model.hearth.device,
            "forced": forced is not None,
            "prompt_tokens": prompt_tokens,
            "tokens": tokens,
            "pieces": [model.token_bytes(t).hex() for t in tokens],
            "text": text,
            "steps": steps,
        }
    finally:
        ctx.close()
        model.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--forced", type=Path, help="a trace whose tokens to feed")
    parser.add_argument("--watch", type=Path, help="a trace whose top-k ids to record")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--ctx", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads; 0: all cores")
    parser.add_argument("--save-logits", type=Path, help="also write all logits (.npy)")
    args = parser.parse_args(argv)
    forced = json.loads(args.forced.read_text())["tokens"] if args.forced else None
    watch = None
    if args.watch:
        watch = [step["top_ids"] for step in json.loads(args.watch.read_text())["steps"]]
    result = trace(
        args.model,
        args.prompt,
        args.tokens,
        forced=forced,
        watch=watch,
        top_k=args.top_k,
        n_ctx=args.ctx,
        n_threads=args.threads,
        save_logits=args.save_logits,
    )
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
