"""Speculative decoding on a GPU in one call: the four fixed tasks with and without prompt lookup
on a model with real weights (tokens per second, drafts kept, same text), and what checking k
tokens costs against one plain step, beside llama.cpp's own llama-bench for the same batches.

    source /tmp/llama/env.sh   # llama.cpp's CUDA build (benchmarks/gpu_run.sh makes it)
    python3 -m benchmarks.speculative_gpu /tmp/starter/model.gguf --out DIR

`--cost-model 8B.gguf` adds the checking cost and the rewrite task on a model that is bound by
memory bandwidth (`gpu_run.sh speculative` passes its random Llama-3-8B Q4_K_M; random weights
copy nothing, so its acceptance says little). About a minute on an H100 for the starter model;
it runs on the CPU build too (`--gpu-layers 0`), only slower.

`--engine hearth` runs the same tasks on the Hearth engine (plain decoding against prompt lookup,
5 pairs back to back, each pair's texts compared: they must be the same, engine/hearth/verify.py)
and prices its checks by its own trial (engine/runtime/speculative/trial.py) instead of
llama-bench's batches: what `--speculative auto` would decide for this model on this GPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.speculative import add_common_arguments, run_tasks
from benchmarks.speculative_cost import KS, checking_cost, format_cost
from engine.benchmark.speculative_run import format_report


def llama_bench_cost(model: str, depth: int) -> dict | None:
    """llama.cpp's own seconds for a batch of k (pp k) and one token (tg), at the same depth
    (None where llama-bench is not on PATH)."""
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


def costs(model: str, args) -> dict:
    """The checking cost of `model`, printed, with llama-bench's beside it where it runs."""
    result: dict = {"model": model}
    result["checking_cost"] = cost = checking_cost(
        model, KS, depth=args.depth, gpu_layers=args.gpu_layers, threads=args.threads
    )
    print(f"model: {model}\n{format_cost(cost)}", flush=True)
    try:
        theirs = llama_bench_cost(model, args.depth)
    except (subprocess.SubprocessError, ValueError, StopIteration, KeyError) as exc:
        result["llama_bench"], theirs = {"error": str(exc)}, None
        print(f"llama-bench failed: {exc}", flush=True)
    else:
        result["llama_bench"] = theirs
    if theirs:
        print(f"llama-bench, same model and depth (one step {theirs['one_step_ms']:.2f} ms; "
              "its batches return the last token's logits only):")  # fmt: skip
        for k, steps in sorted(theirs["cost_in_steps"].items()):
            print(f"{k:>3} {steps:>6.2f} steps  (Hearth: {cost['cost_in_steps'].get(k, 0):.2f})")
    return result


HEARTH_CHECK_SIZES = (2, 4, 5, 8, 16)  # tokens a check decodes: the last one and the drafts


def hearth_costs(model: str, depth: int) -> dict:
    """The Hearth engine's checks of several sizes in plain steps (its own trial, trial.py),
    at `depth` tokens of context, and what "auto" decides; printed."""
    from engine.runtime import protocol as p
    from engine.runtime.hearth_driver import HearthModel
    from engine.runtime.speculative import trial

    params = p.ModelParams(path=model, n_ctx=depth + 64, engine="hearth")
    loaded = HearthModel(params)
    ctx = loaded.new_context(params)
    try:
        ctx.warm_up()
        text = loaded.tokenize(trial.TRIAL_TEXT * 64, add_special=True)
        prompt = (text * (depth // max(1, len(text)) + 1))[:depth]
        cost = {}
        for size in HEARTH_CHECK_SIZES:
            result = trial.measure(ctx, prompt, drafts=size - 1)
            cost[size] = result.check_cost
            plain_ms = result.plain_step_seconds * 1000
            print(f"hearth check of {size:>2} tokens: {result.check_cost:5.2f} plain steps "
                  f"(plain step {plain_ms:.3f} ms)", flush=True)  # fmt: skip
        decided = trial.measure(ctx, prompt)
        print(f"auto: speculative decoding {decided.reason()}", flush=True)
        return {"depth": depth, "cost_in_steps": cost, "auto": decided.reason(),
                "plain_step_ms": decided.plain_step_seconds * 1000}  # fmt: skip
    finally:
        ctx.close()
        loaded.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a GGUF with real weights (the starter model)")
    parser.add_argument("--cost-model", help="also a bandwidth-bound GGUF: cost and rewrite")
    parser.add_argument("--depth", type=int, default=512)
    add_common_arguments(parser)
    parser.set_defaults(reps=5)
    args = parser.parse_args(argv)
    out_dir = Path(args.out or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.engine == "hearth":
        result = {"model": args.model, "hearth_checking_cost": hearth_costs(args.model, args.depth)}
    else:
        result = costs(args.model, args)
    result["tasks"] = run_tasks(args.model, args)
    print(format_report(result["tasks"]), flush=True)
    if args.cost_model:
        result["cost_model"] = costs(args.cost_model, args)
        result["cost_model"]["rewrite"] = run_tasks(args.cost_model, args, names=("rewrite",))
        print(format_report(result["cost_model"]["rewrite"]), flush=True)
    result["seconds"] = time.perf_counter() - started
    (out_dir / "speculative-gpu.json").write_text(json.dumps(result, indent=2))
    print(f"done in {result['seconds']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
