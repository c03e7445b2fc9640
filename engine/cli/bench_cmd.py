"""`hearth bench [MODEL]`: Hearth's generation path beside llama.cpp's llama-bench, same file.

Figures: load time, prefill tok/s over a 512-token prompt, time to first token, decode tok/s
over 128 and 1,024 tokens, decode at 8,192 tokens of depth, peak device memory. When llama-bench
is found (PATH, or next to the engine's library), it runs on the same file in the same command
and the ratios are printed with their targets. Without a GPU it runs on the CPU.

--engine picks what runs in Hearth's worker: llama (llama.cpp, the default), hearth (the Hearth
engine, with --hearth-kv K/V), or both, one after the other in the same command, printed side by
side with the Hearth engine's targets (llama-bench's figures beside them when it is found). A
Hearth load that falls back to llama.cpp fails the benchmark rather than be reported as Hearth's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import replace

from engine.benchmark.hearth_run import BenchConfig, BenchFailed, HearthBench
from engine.benchmark.llama_bench import LlamaBenchError, find_llama_bench, run_llama_bench
from engine.benchmark.report import compare, format_table
from engine.cli import numbers, speculative_bench_cmd
from engine.enums import KV_TYPES
from engine.hardware.cpu_probe import llama_threads
from engine.hardware.speed_of_light import gauge_text
from engine.llama.baseline_load import measure_in_child
from engine.starter_model import starter_model_path
from engine.untrusted_text import printable_line


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
    parser.add_argument("--kv", default="f16", choices=list(KV_TYPES), help="llama.cpp's KV type")
    parser.add_argument("--engine", default="llama", choices=["llama", "hearth", "both"])
    parser.add_argument(
        "--hearth-kv", default="f16", metavar="K[/V]", type=hearth_kv,
        help="the Hearth engine's K/V cache types (f16, q8, rot4; rot2 for K)",
    )  # fmt: skip
    parser.add_argument("--flash-attn", default="on", choices=["on", "off"])
    parser.add_argument("--gpu-layers", type=numbers.gpu_layers, default=-1)
    parser.add_argument(
        "--threads",
        type=numbers.int_in_range(0, 4096),
        default=0,
        help="0: a prompt on the physical cores, a decode on all but one",
    )
    parser.add_argument(
        "--cpu-sampling", action="store_true", help="sample on the CPU, not inside the graph"
    )
    parser.add_argument("--llama-bench", help="path of llama-bench (default: search)")
    parser.add_argument("--no-llama-bench", action="store_true")
    parser.add_argument("--json", action="store_true")
    speculative_bench_cmd.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.model is not None and not args.model.strip():
        print("The model name is empty: name a GGUF file, or leave it out for the starter "
              "model.", file=sys.stderr)  # fmt: skip
        return 2
    if args.model is not None and not os.path.isfile(args.model):
        print(f"No GGUF file at {printable_line(args.model)[:200]}; name an existing file.",
              file=sys.stderr)  # fmt: skip
        return 2
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
    engines = ["llama", "hearth"] if args.engine == "both" else [args.engine]
    configs = {e: _for_engine(config, e, args.hearth_kv) for e in engines}
    for c in configs.values():
        problem = bench_does_not_fit(c)
        if problem:
            print(problem, file=sys.stderr)
            return 1
    figures = {}
    try:
        for engine, c in configs.items():
            if len(configs) > 1:
                _progress(f"Engine: {'the Hearth engine' if engine == 'hearth' else 'llama.cpp'}")
            figures[engine] = HearthBench(c, progress=_progress).run()
    except BenchFailed as exc:
        print(f"The benchmark could not run: {exc}", file=sys.stderr)
        return 1
    if args.engine == "llama":
        return _report_against_llama_bench(args, config, figures["llama"], model)
    return _report_engines(args, config, figures, model)


def _for_engine(config: BenchConfig, engine: str, kv: tuple[str, str]) -> BenchConfig:
    if engine == "llama":
        return config
    return replace(config, engine="hearth", type_k=kv[0], type_v=kv[1])


def _llama_bench(args: argparse.Namespace, config: BenchConfig) -> tuple[dict, str]:
    """llama-bench's figures for llama.cpp's settings (empty when not found or failed), and
    what happened, for the header."""
    binary = None if args.no_llama_bench else find_llama_bench(args.llama_bench)
    if not binary:
        return {}, "not found (see docs/performance.md for its figures)"
    _progress(f"Running llama-bench ({binary}) on the same file…")
    try:
        return llama_cpp_figures(binary, config), binary
    except (LlamaBenchError, OSError, ValueError) as exc:
        return {}, f"llama-bench failed: {exc}"


def _report_engines(args, config: BenchConfig, figures: dict, model: str) -> int:
    """The Hearth engine beside llama.cpp: in Hearth's worker (both), or llama-bench (hearth);
    `config` is llama.cpp's."""
    from engine.benchmark.report import compare_engines

    hearth = figures["hearth"]
    kv = "/".join(args.hearth_kv)
    bench, note = _llama_bench(args, config)
    reference = figures.get("llama", bench)
    rows = compare_engines(hearth, reference, kv)
    names = ("Hearth", "llama.cpp" if "llama" in figures else "llama-bench")
    header = {
        "model": model,
        "machine": f"{platform.node()} ({platform.machine()})",
        "settings": f"Hearth engine KV {kv}; llama.cpp KV {args.kv}, flash attention "
        f"{args.flash_attn}, gpu layers {args.gpu_layers}",
        "columns": "both engines in Hearth's worker, one after the other"
        if "llama" in figures
        else "the Hearth engine in Hearth's worker; llama.cpp's own llama-bench",
        "llama-bench": note,
    }
    extra = (
        {f"llama-bench {k}": round(v, 3) for k, v in bench.items()} if "llama" in figures else {}
    )
    for engine, f in figures.items():
        extra.update({f"{engine}: {k}": v for k, v in speed_of_light(f).items()})
        extra[f"{engine}: peak device memory (MiB)"] = round(f["peak_device_bytes"] / 2**20, 1)
        extra[f"{engine}: peak worker RSS (MiB)"] = round(f["peak_worker_rss_bytes"] / 2**20, 1)
    if args.json:
        out = {**header, "engines": figures, "llama_bench": bench,
               "rows": [r.to_dict() for r in rows]}  # fmt: skip
        print(json.dumps(out, indent=2))
    else:
        print(format_table(header, rows, extra, names))
    return 0


def _report_against_llama_bench(args, config: BenchConfig, hearth: dict, model: str) -> int:
    llama, note = _llama_bench(args, config)
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
        **speed_of_light(hearth),
    }
    if args.json:
        out = {**header, "hearth": hearth, "llama_cpp": llama, "rows": [r.to_dict() for r in rows]}
        print(json.dumps(out, indent=2))
    else:
        print(format_table(header, rows, extra))
    return 0


def speed_of_light(figures: dict) -> dict[str, str]:
    """Each decode figure beside its bound ("decode 128: 61% of the 344 tok/s bound"), and the
    bandwidth the bounds divide by; empty where the worker knew no bound."""
    out = {}
    for key in sorted(k for k in figures if k.startswith("bound_") and k.endswith("_tok_s")):
        label = key.removeprefix("bound_").removesuffix("_tok_s")
        gauge = gauge_text(figures.get(f"decode_{label}_tok_s", 0.0), figures[key])
        if gauge:
            name = "decode at depth" if label == "at_depth" else f"decode {label}"
            out[f"{name}: speed of light"] = gauge
    if out:
        source = figures.get("bandwidth_source", "")
        out["bandwidth the bound divides by"] = f"{figures['bandwidth_gbps']:,.1f} GB/s ({source})"
    return out


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
    )
    # the threads a llama.cpp load here computes with: a prompt on the physical cores
    # (llama-bench's default), one token a step on all of them but one
    decode_threads, _ = llama_threads(c.threads)
    pp = run_llama_bench(
        binary, c.model, prompt=c.prompt_tokens, threads=c.threads or None, **common
    )
    figures = {
        "prefill_tok_s": pp.tokens_per_second,
        "prefill_s": c.prompt_tokens / pp.tokens_per_second,
    }
    for n in c.decode_lengths:
        figures[f"decode_{n}_tok_s"] = run_llama_bench(
            binary, c.model, gen=n, threads=decode_threads, **common
        ).tokens_per_second
    if c.depth:
        deep = run_llama_bench(
            binary, c.model, gen=c.depth_decode, depth=c.depth, threads=decode_threads, **common
        )
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
        type_v=config.type_v,
        flash_attn=config.flash_attn == "on",
        n_gpu_layers=None if config.gpu_layers < 0 else config.gpu_layers,
        engine=config.engine,
    )
    machine = snapshot_machine()
    if config.engine == "hearth":
        # the memory alone: whether the engine runs here is the worker's call (it may be asked
        # to run on the CPU, HEARTH_ENGINE_DEVICE=cpu), and a fallback fails the benchmark
        from engine.gguf import read_model_info
        from engine.planner import Planner
        from engine.planner.manual import plan_manual

        plan = plan_manual(
            Planner(read_model_info(config.model)), machine.plan_request(), chosen.manual_choice
        )
        over = ", ".join(f"{n / 2**30:.2f} GiB more on {dev}" for dev, n in plan.over_budget)
    else:
        decision = plan_load(config.model, machine, chosen)
        if decision.source == PlanSource.CHOSEN:
            return None
        over = decision.shortfall_text()
    if not over:
        return None
    return (
        f"The benchmark's settings ({config.n_ctx:,} tokens, {chosen.kv_text} KV, "
        f"{config.engine} engine) need {over} than this machine has free; lower --depth or "
        "--decode, or use a smaller model."
    )


def hearth_kv(text: str) -> tuple[str, str]:
    """--hearth-kv: "K/V" or "K" (V alike), of the formats the Hearth engine holds."""
    from engine.hearth.capabilities import K_FORMATS, V_FORMATS

    k, _, v = text.partition("/")
    v = v or k
    if k not in K_FORMATS or v not in V_FORMATS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: K one of {', '.join(K_FORMATS)}, V one of {', '.join(V_FORMATS)}"
        )
    return k, v
