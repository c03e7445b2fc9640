"""Decode speed of Hearth's generation path next to llama.cpp's own llama-bench, same file.

Hearth's figure goes through the whole path a user gets: the engine worker process, llama.cpp's
sampler chain, the detokenizer and the event pipe. Decode tok/s counts the decode steps between
the first and the last generated token (the first comes out of the prefill), which is what
llama-bench's tg test times: one llama_decode of one token per step.

    python benchmarks/bench_decode.py MODEL.gguf [--n 128] [--reps 3] [--json]

llama-bench is taken from PATH (or --llama-bench); without it only Hearth's figures print.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EventQueue

GREEDY = p.SamplingParams(temperature=0.0)
DEFAULT_CHAIN = p.SamplingParams(seed=1234)  # temp 0.7, top-k 40, top-p 0.95, min-p 0.05


def hearth_decode(
    model: str, *, n: int, reps: int, ctx: int, flash_attn: str, backend_sampling: bool
) -> dict:
    events = EventQueue()
    client = EngineClient(events)
    client.start()
    try:
        events.wait_for(p.Ready, timeout=120)
        client.load(
            p.ModelParams(
                path=model,
                n_ctx=ctx,
                n_gpu_layers=-1,
                flash_attn=flash_attn,
                backend_sampling=backend_sampling,
            )
        )
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=600)
        if not isinstance(loaded, p.ModelLoaded):
            raise SystemExit(f"load failed: {loaded}")
        results = {"load_seconds": loaded.load_seconds, "description": loaded.description}
        for label, sampling in (("greedy", GREEDY), ("default_chain", DEFAULT_CHAIN)):
            _generate(client, events, sampling, 16)  # warm-up: kernels loaded, graphs built
            rates = []
            for _ in range(reps):
                # A fresh prompt each time: the cache is cleared, as llama-bench does per rep.
                stats = _generate(client, events, sampling, n + 1, prompt=f"{len(rates)} Hello")
                rates.append(stats.decode_tokens_per_second)
            results[label] = {"tok_s": statistics.median(rates), "all": rates}
        return results
    finally:
        client.close()


def _generate(client, events, sampling, max_tokens, prompt="Hello") -> p.GenerationStats:
    request_id = client.generate(
        prompt=prompt, sampling=sampling, max_tokens=max_tokens, ignore_eos=True
    )
    while True:
        event = events.get(timeout=600)
        if isinstance(event, p.GenerationDone) and event.request_id == request_id:
            if event.stats.n_generated != max_tokens:
                raise SystemExit(f"generated {event.stats.n_generated}, wanted {max_tokens}")
            return event.stats
        if not isinstance(event, p.TokenText):
            raise SystemExit(f"generation failed: {event}")


def llama_bench_decode(binary: str, model: str, *, n: int, reps: int, flash_attn: str) -> dict:
    fa = {"on": "1", "off": "0"}.get(flash_attn, "1")
    cmd = [binary, "-m", model, "-p", "0", "-n", str(n), "-r", str(reps), "-fa", fa, "-ngl", "999"]
    out = subprocess.run([*cmd, "-o", "json"], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)
    row = next(r for r in rows if r.get("n_gen") == n)
    return {
        "tok_s": row["avg_ts"],
        "stddev": row.get("stddev_ts"),
        "build": row.get("build_commit"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--n", type=int, default=128, help="tokens to generate per run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--flash-attn", default="on", choices=["on", "off", "auto"])
    parser.add_argument("--llama-bench", default=shutil.which("llama-bench"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    report = {"model": args.model, "n": args.n, "flash_attn": args.flash_attn}
    for where, on_backend in (("hearth", False), ("hearth_backend_sampling", True)):
        report[where] = hearth_decode(
            args.model,
            n=args.n,
            reps=args.reps,
            ctx=args.ctx,
            flash_attn=args.flash_attn,
            backend_sampling=on_backend,
        )
    if args.llama_bench:
        bench = llama_bench_decode(
            args.llama_bench, args.model, n=args.n, reps=args.reps, flash_attn=args.flash_attn
        )
        report["llama_bench"] = bench
        for where in ("hearth", "hearth_backend_sampling"):
            for label in ("greedy", "default_chain"):
                row = report[where][label]
                row["ratio"] = row["tok_s"] / bench["tok_s"]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    desc = report["hearth"]["description"]
    print(f"model: {args.model} ({desc}), tg{args.n}, flash attention {args.flash_attn}")
    if "llama_bench" in report:
        print(f"  llama-bench tg{args.n}: {report['llama_bench']['tok_s']:8.1f} tok/s")
    for where in ("hearth", "hearth_backend_sampling"):
        for label in ("greedy", "default_chain"):
            row = report[where][label]
            ratio = f"  ratio {row['ratio']:.3f}" if "ratio" in row else ""
            print(f"  {where} ({label}): {row['tok_s']:8.1f} tok/s{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
