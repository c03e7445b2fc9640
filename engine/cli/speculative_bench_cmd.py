"""`hearth bench --speculative METHOD`: decode speed with and without speculative decoding on
fixed tasks (engine/benchmark/speculative_run.py), instead of the llama-bench comparison."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.benchmark.speculative_run import (
    SpeculativeBench,
    SpeculativeBenchConfig,
    SpeculativeBenchFailed,
    format_report,
    load_tasks,
)
from engine.cli.speculative_args import add_speculative_arguments, speculative_from

# The repository's fixed tasks, found when hearth runs from a source checkout.
REPO_TASKS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "speculative_tasks.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_speculative_arguments(parser)
    parser.add_argument(
        "--tasks",
        metavar="JSON",
        help="tasks for --speculative (default: benchmarks/data/speculative_tasks.json)",
    )


def wanted(args: argparse.Namespace) -> bool:
    return getattr(args, "speculative", "off") != "off"


def run(args: argparse.Namespace, model: str) -> int:
    speculative, problem = speculative_from(args)
    tasks_path = args.tasks or (REPO_TASKS if REPO_TASKS.is_file() else None)
    if problem is None and tasks_path is None:
        problem = (
            "No task file: give --tasks JSON (shaped like benchmarks/data/speculative_tasks.json)."
        )
    if problem:
        print(problem, file=sys.stderr)
        return 2
    try:
        config = SpeculativeBenchConfig(
            model=model,
            tasks=load_tasks(tasks_path),
            speculative=speculative,
            reps=args.reps,
            gpu_layers=args.gpu_layers,
            threads=args.threads,
            flash_attn=args.flash_attn,
        )
        report = SpeculativeBench(config, progress=_progress).run()
    except SpeculativeBenchFailed as exc:
        print(f"The benchmark could not run: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


def _progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)
