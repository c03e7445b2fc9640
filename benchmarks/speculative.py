"""Speculative decoding: tokens per second with and without, on fixed tasks, and the cost of
checking k drafted tokens in one llama_decode against one plain decode step.

    python benchmarks/speculative.py [MODEL] --reps 5 --threads 1 --out result.json

The tasks (benchmarks/data/speculative_tasks.json) are answered greedily without, then with
speculation, back to back on one load (engine/benchmark/speculative_run.py, the code behind
`hearth bench --speculative`), so on a shared machine both figures of a pair see the same load;
every pair's texts are compared. The checking cost bounds what any drafter can gain: a step that
checks k tokens costs cost(k) plain steps and emits at most k tokens (speculative_cost.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.speculative_cost import checking_cost, format_cost
from engine.benchmark.speculative_run import (
    SpeculativeBench,
    SpeculativeBenchConfig,
    format_report,
    load_tasks,
)
from engine.runtime import protocol as p

TASKS = Path(__file__).resolve().parent / "data" / "speculative_tasks.json"


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
        engine=args.engine,
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
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="0: a prompt on the physical cores, a decode on all but one",
    )
    parser.add_argument("--out", help="write the figures here as JSON")
    parser.add_argument("--engine", default="llama", choices=["llama", "hearth"],
                        help="the engine that decodes (hearth: no fallback)")  # fmt: skip


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
