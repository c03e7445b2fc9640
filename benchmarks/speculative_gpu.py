"""Speculative decoding on a GPU: what checking k tokens costs against one decode step (this
bounds every drafter's speed-up), beside llama.cpp's own llama-bench figures for the same batch
sizes, and prompt lookup end to end on the rewrite task.

    python3 benchmarks/speculative_gpu.py MODEL.gguf [--starter STARTER.gguf] --out DIR
    (benchmarks/gpu_run.sh speculative: the random Llama-3-8B-shaped Q4_K_M, and the starter
    model when it is on the machine)

A model with random weights does not copy its prompt as a trained one does, so its acceptance
on the rewrite task says little; the checking cost does not depend on the weights. The starter
model (real weights) gives the end-to-end figure with real acceptance. About a minute and a half
on an H100 once the model exists.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

from benchmarks.speculative import add_common_arguments, checking_cost, format_cost, run_tasks
from engine.benchmark.speculative_run import format_report

KS = (2, 3, 4, 6, 8, 12, 16)


def llama_bench_cost(model: str, depth: int) -> dict | None:
    """llama.cpp's own seconds for a batch of k (pp k) and one token (tg), at the same depth."""
    binary = shutil.which("llama-bench")
    if binary is None:
        return None
    ks = ",".join(str(k) for k in KS)
    cmd = [binary, "-m", model, "-p", ks, "-n", "32", "-d", str(depth), "-fa", "1", "-r", "5",
           "-o", "json"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    rows = json.loads(out)
    one = next(r for r in rows if r["n_gen"] > 0)
    one_step = 1.0 / one["avg_ts"]
    cost = {}
    for r in rows:
        if r["n_prompt"] > 0:
            cost[r["n_prompt"]] = (r["n_prompt"] / r["avg_ts"]) / one_step
    return {"command": " ".join(cmd), "one_step_ms": one_step * 1000, "cost_in_steps": cost}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--starter", help="the starter model, for the end-to-end figures")
    parser.add_argument("--depth", type=int, default=512)
    add_common_arguments(parser)
    parser.set_defaults(reps=3)
    args = parser.parse_args(argv)
    out_dir = Path(args.out or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {"model": args.model}
    result["checking_cost"] = cost = checking_cost(
        args.model, KS, depth=args.depth, gpu_layers=args.gpu_layers, threads=args.threads
    )
    print(format_cost(cost), flush=True)
    try:
        result["llama_bench"] = theirs = llama_bench_cost(args.model, args.depth)
    except (subprocess.SubprocessError, ValueError, StopIteration, KeyError) as exc:
        result["llama_bench"], theirs = {"error": str(exc)}, None
    if theirs:
        print(f"llama-bench, same model and depth (one step {theirs['one_step_ms']:.2f} ms; "
              "its batches return the last token's logits only):")  # fmt: skip
        for k, steps in sorted(theirs["cost_in_steps"].items()):
            print(f"{k:>3} {steps:>6.2f} steps  (Hearth: {cost['cost_in_steps'].get(k, 0):.2f})")
    result["rewrite"] = run_tasks(args.model, args, names=("rewrite",))
    print(format_report(result["rewrite"]), flush=True)
    if args.starter:
        result["starter"] = run_tasks(args.starter, args)
        print(format_report(result["starter"]), flush=True)
    (out_dir / "speculative-gpu.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
