"""`hearth bench [MODEL]`: Hearth's generation path beside llama.cpp's llama-bench, same file.

Figures: load time, prefill tok/s over a 512-token prompt, time to first token, decode tok/s
over 128 and 1,024 tokens, decode at 8,192 tokens of depth, peak device memory. When llama-bench
is found (PATH, or next to the engine's library), it runs on the same file in the same command
and the ratios are printed with their targets. Without a GPU it runs on the CPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

from engine.benchmark.hearth_run import BenchConfig, BenchFailed, HearthBench
from engine.benchmark.llama_bench import LlamaBenchError, find_llama_bench, run_llama_bench
from engine.benchmark.report import compare, format_table
from engine.cli import numbers, speculative_bench_cmd
from engine.enums import KV_TYPES
from engine.llama.baseline_load import measure_in_child
from engine.starter_model import starter_model_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="GGUF file (default: the starter model)")
    tokens = numbers.int_in_range(1, numbers.MAX_CONTEXT_TOKENS)
    parser.add_argument("--reps", type=numbers.int_in_range(1, 1000), default=3)
    parser.add_argument("--prompt", type=tokens, default=512, help="prefill prompt length")
    parser.add_argument("--decode", type=tokens, nargs="+", default=[128, 1024])
    parser.add_argument(
        "--depth", type=numbers.int_in_range(0, numbers.MAX_CONTEXT_TOKENS), default=8192,
        help="0 skips the depth test",
    )  # fmt: skip
    parser.add_argument("--kv", default="f16", choices=list(KV_TYPES))
    parser.add_argument("--flash-attn", default="on", choices=["on", "off"])
    parser.add_argument("--gpu-layers", type=numbers.gpu_layers, default=-1)
    parser.add_argument(
        "--threads", type=numbers.int_in_range(0, 4096), default=0, help="0: physical cores"
    )
    parser.add_argument(
        "--cpu-sampling", action="store_true", help="sample on the CPU, not inside the graph"
    )
    parser.add_argument("--llama-bench", help="path of llama-bench (default: search)")
    parser.add_argument("--no-llama-bench", action="store_true")
    parser.add_argument("--json", action="store_true")
    speculative_bench_cmd.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    model = args.model or str(starter_model_path() or "")
    if not model:
        print("No model given and the starter model is not installed.", file=sys.stderr)
        return 2
    if speculative_bench_cmd.wanted(args):
        return speculative_bench_cmd.run(args, model)
    config = BenchConfig(
        model=model,
        prompt_tokens=args.prompt,
        decode_lengths=tuple(args.decode),
        depth=args.depth,
        reps=args.reps,
        gpu_layers=args.gpu_layers,
        flash_attn=args.flash_attn,
        type_k=args.kv,
        type_v=args.kv,
        backend_sampling=not args.cpu_sampling,
        threads=args.threads,
    )
    problem = bench_does_not_fit(config)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    try:
        hearth = HearthBench(config, progress=_progress).run()
    except BenchFailed as exc:
        print(f"The benchmark could not run: {exc}", file=sys.stderr)
        return 1
    binary = None if args.no_llama_bench else find_llama_bench(args.llama_bench)
    llama: dict = {}
    note = "llama-bench not found: Hearth's figures only (see docs/performance.md)"
    if binary:
        _progress(f"Running llama-bench ({binary}) on the same file…")
        try:
            llama = llama_cpp_figures(binary, config)
            note = binary
        except (LlamaBenchError, OSError, ValueError) as exc:
            note = f"llama-bench failed: {exc}"
    rows = compare(hearth, llama)
    header = {
        "model": model,
        "machine": f"{platform.node()} ({platform.machine()})",
        "settings": f"flash attention {args.flash_attn}, KV {args.kv}, "
        f"gpu layers {args.gpu_layers}, sampling {'CPU' if args.cpu_sampling else 'in graph'}",
        "llama-bench": note,
    }
    extra = {
        "worker start (s)": round(hearth["worker_start_s"], 3),
        "new context on loaded weights (s)": round(hearth["context_reload_s"], 3),
        "peak device memory (MiB)": round(hearth["peak_device_bytes"] / 2**20, 1),
        "peak worker RSS (MiB)": round(hearth["peak_worker_rss_bytes"] / 2**20, 1),
    }
    if args.json:
        out = {**header, "hearth": hearth, "llama_cpp": llama, "rows": [r.to_dict() for r in rows]}
        print(json.dumps(out, indent=2))
    else:
        print(format_table(header, rows, extra))
    return 0


def _progress(text: str) -> None:
    # stderr: stdout carries the table or the --json report, which must stay parseable.
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def llama_cpp_figures(binary: str, c: BenchConfig) -> dict:
    common = dict(
        reps=c.reps,
        flash_attn=c.flash_attn == "on",
        gpu_layers=999 if c.gpu_layers < 0 else c.gpu_layers,
        type_k=c.type_k,
        type_v=c.type_v,
        threads=c.threads or None,
    )
    pp = run_llama_bench(binary, c.model, prompt=c.prompt_tokens, **common)
    figures = {
        "prefill_tok_s": pp.tokens_per_second,
        "prefill_s": c.prompt_tokens / pp.tokens_per_second,
    }
    for n in c.decode_lengths:
        figures[f"decode_{n}_tok_s"] = run_llama_bench(
            binary, c.model, gen=n, **common
        ).tokens_per_second
    if c.depth:
        deep = run_llama_bench(binary, c.model, gen=c.depth_decode, depth=c.depth, **common)
        figures["decode_at_depth_tok_s"] = deep.tokens_per_second
    loads = [
        measure_in_child(
            c.model,
            n_ctx=c.n_ctx,
            gpu_layers=c.gpu_layers,
            flash_attn=c.flash_attn,
            type_k=c.type_k,
            type_v=c.type_v,
        )
        for _ in range(c.reps)
    ]
    figures["load_s"] = sorted(loads)[len(loads) // 2]
    return figures


def bench_does_not_fit(config: BenchConfig) -> str | None:
    """Why the benchmark's settings would not fit this machine now (the load policy's check),
    or None. The benchmark then loads with exactly these settings, as llama-bench does."""
    from engine.session import PlanSource, RememberedChoice, plan_load, snapshot_machine

    chosen = RememberedChoice(
        n_ctx=config.n_ctx,
        kv_type=config.type_k,
        flash_attn=config.flash_attn == "on",
        n_gpu_layers=None if config.gpu_layers < 0 else config.gpu_layers,
    )
    decision = plan_load(config.model, snapshot_machine(), chosen)
    if decision.source == PlanSource.CHOSEN:
        return None
    return (
        f"The benchmark's settings ({config.n_ctx:,} tokens, {config.type_k} KV) need "
        f"{decision.shortfall_text()} than this machine has free; lower --depth or --decode, "
        "or use a smaller model."
    )
