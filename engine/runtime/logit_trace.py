"""Record a model's logits along a greedy continuation: the evidence for comparing two builds.

`trace()` runs the prompt the way the engine does (one batch, BOS added), then steps one token
at a time, and at each step keeps the top-k logits and the token chosen: the argmax (a greedy
run), or a given token (teacher forcing, so that a second build is scored on the first one's
tokens and one early difference cannot change everything after it). It uses the low-level
driver directly, without the worker process, and reads the logits on the CPU instead of sampling
inside the graph, because the comparison needs the numbers, not only the choice.

Run as a program it prints the trace as JSON; the backend checks call it this way in a child
process of the build under test (engine/runtime/greedy_check.py compares two traces):

    python -m engine.runtime.logit_trace MODEL --prompt TEXT --tokens 32 [--gpu-layers N]
        [--flash-attn on|off|auto] [--kv f16|f32|q8_0|...] [--prompt-by-token]
        [--forced TRACE.json] [--watch TRACE.json] [--top-k 5] [--save-logits LOGITS.npy]

`--forced` feeds the tokens of an earlier trace instead of the argmax; `--watch` also records
this build's logits at that trace's top-k ids at each position (to measure the difference on
the tokens that mattered to the reference). `--kv` sets the KV cache type and `--prompt-by-token`
decodes the prompt one token at a time: both for finding which kernel a difference comes from
(benchmarks/backends/cuda_error_sources.py), not what the engine does.
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
    n_gpu_layers: int = 0,
    flash_attn: str = "auto",
    forced: list[int] | None = None,
    watch: list[list[int]] | None = None,
    top_k: int = 5,
    n_ctx: int = 1024,
    kv_type: str = "f16",
    prompt_by_token: bool = False,
    save_logits: Path | None = None,
) -> dict:
    """The logits of `n_tokens` steps after `prompt`; see the module docstring.
    `save_logits` also writes every step's whole logit vector there (.npy, steps x vocab)."""

    from engine.llama import driver as llama
    from engine.llama.log import process_log
    from engine.runtime.llama_engine import LlamaModel
    from engine.runtime.protocol import ModelParams

    if forced is not None and len(forced) < n_tokens:
        raise ValueError(f"{len(forced)} forced tokens for {n_tokens} steps")
    params = ModelParams(
        path=model_path,
        n_ctx=n_ctx,
        n_gpu_layers=n_gpu_layers,
        flash_attn=flash_attn,
        type_k=kv_type,
        type_v=kv_type,
    )
    log = process_log()  # where the buffers went, as llama.cpp reports them
    log.take_allocations()  # only this load's
    model = LlamaModel(params)
    # numpy only after llama.cpp's libraries are loaded: on the GPU machine (the CUDA build,
    # Python 3.12, numpy 2) numpy imported first made the CUDA model load crash (SIGSEGV).
    import numpy as np

    ctx = model.new_context(params)
    allocations = [
        {"device": a.device, "kind": a.kind, "bytes": a.bytes} for a in log.take_allocations()
    ]
    try:
        ctx.warm_up()  # as the engine does after a load
        prompt_tokens = model.tokenize(prompt, add_special=True)
        if prompt_by_token:  # batch-of-one kernels for the prompt too
            for token in prompt_tokens:
                out = ctx.step(token)
        else:
            out = ctx.decode(prompt_tokens)
        continuation = trace_continuation(
            ctx,
            model,
            prompt_tokens,
            out,
            lambda _out: np.ctypeslib.as_array(ctx.logits_of_last(), shape=(model.n_vocab,)).copy(),
            n_tokens,
            forced=forced,
            watch=watch,
            top_k=top_k,
            save_logits=save_logits,
        )
        return {
            "model": Path(model_path).name,
            "prompt": prompt,
            "n_gpu_layers": n_gpu_layers,
            "flash_attn": flash_attn,
            "kv_type": kv_type,
            "prompt_by_token": prompt_by_token,
            "system_info": llama.system_info(),
            "allocations": allocations,
            **continuation,
        }
    finally:
        ctx.close()
        model.close()


def trace_continuation(
    ctx, model, prompt_tokens, out, logits_of, n_tokens: int, *, forced, watch, top_k, save_logits
):  # fmt: skip
    """The trace's record of `n_tokens` greedy (or forced) decode steps of an engine's context
    (engine_api.py) from the prompt's output `out`: the tokens, their text, and each step's
    top-k and watched logits; `logits_of(out)` is a step output's logits as a numpy vector.
    Shared by every engine's trace, so greedy_check reads one format."""
    import numpy as np

    steps: list[dict] = []
    tokens: list[int] = []
    every = []
    for i in range(n_tokens):
        logits = logits_of(out)
        if save_logits is not None:
            every.append(logits)
        top = np.argsort(-logits, kind="stable")[:top_k]
        step = {
            "argmax": int(top[0]),
            "argmax_piece": model.token_bytes(int(top[0])).hex(),
            "top_ids": [int(t) for t in top],
            "top_logits": [float(logits[t]) for t in top],
        }
        if watch is not None:
            step["watched_logits"] = [float(logits[t]) for t in watch[i]]
        steps.append(step)
        token = forced[i] if forced is not None else int(top[0])
        tokens.append(token)
        if i + 1 < n_tokens:
            out = ctx.step(token)
    if save_logits is not None:
        np.save(save_logits, np.stack(every))
    text = b"".join(model.token_bytes(t) for t in tokens).decode("utf-8", "replace")
    return {
        "forced": forced is not None,
        "prompt_tokens": prompt_tokens,
        "tokens": tokens,
        "pieces": [model.token_bytes(t).hex() for t in tokens],
        "text": text,
        "steps": steps,
    }


def trace_parser(description: str) -> argparse.ArgumentParser:
    """The options both engines' traces take (this module's and hearth_trace's); each adds its
    own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--forced", type=Path, help="a trace whose tokens to feed")
    parser.add_argument("--watch", type=Path, help="a trace whose top-k ids to record")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--ctx", type=int, default=1024)
    parser.add_argument("--save-logits", type=Path, help="also write all logits (.npy)")
    return parser


def print_trace(trace_fn, args: argparse.Namespace, **options) -> int:
    """Run `trace_fn` with the options trace_parser reads (and the engine's own `options`), and
    print the trace as JSON."""
    forced = json.loads(args.forced.read_text())["tokens"] if args.forced else None
    watch = None
    if args.watch:
        watch = [step["top_ids"] for step in json.loads(args.watch.read_text())["steps"]]
    result = trace_fn(args.model, args.prompt, args.tokens, forced=forced, watch=watch,
                      top_k=args.top_k, n_ctx=args.ctx, save_logits=args.save_logits,
                      **options)  # fmt: skip
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = trace_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--gpu-layers", type=int, default=0, help="-1: all layers")
    parser.add_argument("--flash-attn", default="auto", choices=("on", "off", "auto"))
    parser.add_argument("--kv", default="f16", help="KV cache type (K and V)")
    parser.add_argument("--prompt-by-token", action="store_true")
    args = parser.parse_args(argv)
    return print_trace(trace, args, n_gpu_layers=args.gpu_layers, flash_attn=args.flash_attn,
                       kv_type=args.kv, prompt_by_token=args.prompt_by_token)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
