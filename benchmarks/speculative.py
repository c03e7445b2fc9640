"""Speculative decoding: tokens per second with and without, on fixed tasks, and the cost of
checking k drafted tokens in one llama_decode against one plain decode step.

    python benchmarks/speculative.py [MODEL] --reps 5 --threads 1 --out result.json

The tasks (benchmarks/data/speculative_tasks.json) are answered greedily without, then with
speculation, back to back on one load (engine/benchmark/speculative_run.py, the code behind
`hearth bench --speculative`), so on a shared machine both figures of a pair see the same load;
every pair's texts are compared. The checking cost bounds what any drafter can gain: a step that
checks k drafts costs cost(k) plain steps and emits at most k + 1 tokens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from engine.benchmark.speculative_run import (
    SpeculativeBench,
    SpeculativeBenchConfig,
    format_report,
    load_tasks,
)
from engine.runtime import protocol as p

TASKS = Path(__file__).resolve().parent / "data" / "speculative_tasks.json"


def checking_cost(
    model_path: str,
    ks: tuple[int, ...] = (2, 3, 4, 6, 8, 12, 16),
    *,
    depth: int = 512,
    reps: int = 10,
    gpu_layers: int = -1,
    threads: int = 0,
) -> dict:
    """Median seconds of one decode step, and of one step checking k tokens (a batch of k
    with logits for every one, as the speculative loop asks), after `depth` cached tokens."""
    from engine.llama.batch import SequenceBatch
    from engine.llama.driver import Context, Model
    from engine.runtime.to_llama import context_settings, model_settings

    params = p.ModelParams(
        path=model_path, n_ctx=depth + 64, n_gpu_layers=gpu_layers, n_threads=threads,
        flash_attn="on", speculative=p.SpeculativeParams(method="prompt_lookup", max_draft=max(ks)),
    )  # fmt: skip
    model = Model(model_settings(params))
    ctx = Context(model, context_settings(params))
    batch = SequenceBatch(max(ks) + 1)
    try:
        ctx.decode([(7 * i + 11) % model.n_vocab for i in range(depth)])
        ctx.synchronize()

        def timed(k: int) -> float:
            samples = []
            for rep in range(reps + 1):  # the first is a warm-up (graph reserve for this size)
                batch.clear()
                for i in range(k):
                    batch.add((13 * (rep + i) + 5) % model.n_vocab, depth + i, 0, output=True)
                started = time.perf_counter()
                batch.decode(ctx)
                ctx.synchronize()
                ctx.logits_at(k - 1)
                samples.append(time.perf_counter() - started)
                ctx.forget_from(depth)
            return statistics.median(samples[1:])

        one = timed(1)
        rows = {k: timed(k) for k in ks}
        return {
            "depth": depth,
            "one_step_ms": one * 1000,
            "checking_ms": {k: s * 1000 for k, s in rows.items()},
            "cost_in_steps": {k: s / one for k, s in rows.items()},
        }
    finally:
        batch.close()
        ctx.close()
        model.close()


def format_cost(cost: dict) -> str:
    lines = [
        f"checking k tokens in one llama_decode after {cost['depth']} cached tokens "
        f"(one decode step: {cost['one_step_ms']:.2f} ms)",
        f"{'k':>3} {'ms':>8} {'steps':>6}  bound (k tokens: the last sampled one and k - 1 drafts; "
        "at most k come out, so at most k / steps)",
    ]
    for k, ms in cost["checking_ms"].items():
        steps = cost["cost_in_steps"][k]
        lines.append(f"{k:>3} {ms:>8.2f} {steps:>6.2f}  {k / steps:>5.2f}x")
    return "\n".join(lines)


def run_tasks(model: str, args, names: tuple[str, ...] = ()) -> dict:
    tasks = load_tasks(args.tasks)
    if names:
        tasks = tuple(t for t in tasks if t.name in names)
    config = SpeculativeBenchConfig(
        model=model,
        tasks=tasks,
        speculative=p.SpeculativeParams(
            method=args.method, draft_path=args.draft_model or "", max_draft=args.max_draft
        ),
        reps=args.reps,
        gpu_layers=args.gpu_layers,
        threads=args.threads,
        flash_attn="on",
    )
    return SpeculativeBench(config, progress=_progress).run()


def _progress(text: str) -> None:
    print(f"[speculative] {text}", file=sys.stderr, flush=True)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", default="prompt_lookup",
                        choices=["prompt_lookup", "draft_model", "mtp"])  # fmt: skip
    parser.add_argument("--draft-model", help="the draft model's GGUF (--method draft_model)")
    parser.add_argument("--max-draft", type=int, default=16)
    parser.add_argument("--tasks", default=str(TASKS))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--threads", type=int, default=0, help="0: physical cores")
    parser.add_argument("--out", help="write the figures here as JSON")


def main(argv: list[str] | None = None) -> int:
    from engine.starter_model import starter_model_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="GGUF (default: the starter model)")
    add_common_arguments(parser)
    parser.add_argument("--no-cost", action="store_true", help="skip the checking-cost curve")
    args = parser.parse_args(argv)
    model = args.model or str(starter_model_path())
    result: dict = {"model": model, "threads": args.threads}
    if not args.no_cost:
        result["checking_cost"] = checking_cost(model, gpu_layers=args.gpu_layers,
                                                threads=args.threads)  # fmt: skip
        print(format_cost(result["checking_cost"]))
    result["tasks"] = run_tasks(model, args)
    print(format_report(result["tasks"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
