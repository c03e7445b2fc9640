"""The Hearth engine's speed on a GPU, beside llama-bench of the same llama.cpp build.

    python -m benchmarks.hearth_speed MODEL.gguf [--llama-bench] [--depth 32768]
        [--kv f16 rot4 ...] [--profile] [--json OUT.json]
    python -m benchmarks.hearth_speed --write-random llama3-8b OUT.gguf [--vocab VOCAB.gguf]
        [--quant Q4_K_M]    (shapes: testkit/synthetic_gguf.py SHAPES, e.g. qwen3-30b-a3b;
                             gpt-oss-20b with --quant MXFP4_MOE)

What it measures, each on the engine core (engine/hearth; token ids, no tokenizer):
- copy: device-to-device copy rate (bytes read + written / time), the bandwidth ceiling;
- load: the file's tensors onto the GPU (Transformer.load, synchronized); the CUDA context is
  made before the clock starts and reported apart;
- pp512: 512 random tokens in one chunk into an empty cache, replayed from its CUDA graph after
  the warm runs as the worker replays it (engine/hearth/prefill_graph.py; HEARTH_PREFILL_GRAPH=0:
  launched eagerly);
- ttft: the same 512 tokens, then the first token's id on the host;
- tg128: 128 greedy decode steps from one token, each fed the last one's pick and read on the
  host (one wait a token), through the CUDA graphs as the worker runs them (each next step
  launched before this one's token is read), then without launching ahead, then eagerly
  (no graph; the first steps also compile the kernels); the graph replayed alone, back to
  back, is the GPU's own time per step;
- KV formats: f16 is the plain torch cache, paged-f16 / rot4 / K/V kernels' paged one (what
  the worker uses on a GPU, f16 included);
- decode at depth: the cache filled with `depth` positions of random K and V (not by a
  prefill: speed does not depend on the values), then 32 decode steps, per KV format;
- bandwidth-bound fraction: (weight bytes + KV bytes one step reads) / step time / copy rate;
  a mixture-of-experts layer's weight bytes are its router, its shared expert if any, and the
  k experts a token picks (top-k of n_expert), not every expert;
- memory: weights, KV cache, the graph's pool, the CUDA context (what torch does not hold);
- --profile: the kernels of one eager decode step (torch.profiler), longest first;
- --load-runs N: only the load, N times per engine from a cold and from a warm page cache,
  each in a fresh process, beside llama.cpp's (benchmarks/hearth_speed_load.py);
- --worker-runs N [--pick-s S]: the load in a fresh engine worker, Ready -> Load -> first
  token, with and without the import warm-up, beside llama.cpp's (the same module).
--llama-bench runs llama.cpp's `llama-bench` on the same file in the same process tree
(pp512, tg128, and tg at the depth with an f16 cache; flash attention on) and prints the
ratios. `--write-random` writes a GGUF of a real model's shape and Q4_K_M's types with random
(valid) blocks in seconds (llama-quantize of a random F16 file takes 80 s and 16 GB of disk);
with `--vocab` llama.cpp loads it too, so both engines run the very same file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from benchmarks import hearth_speed_files, hearth_speed_load
from engine.benchmark.llama_bench import LlamaBenchError, find_llama_bench, run_llama_bench
from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import select_ops
from engine.hearth.weights import GGUFTensors

DEVICE = "cuda"


def sync() -> None:
    torch.cuda.synchronize()


def copy_rate() -> float:
    """Bytes read + written per second by a 2 GiB device-to-device copy (median of 10)."""
    src = torch.empty(2**30, dtype=torch.uint16, device=DEVICE).random_(0, 2**15)
    dst = torch.empty_like(src)
    times = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * 2**31 / statistics.median(times[2:])


def new_cache(model: Transformer, kv: str, n_ctx: int):
    """The cache the engine builds on this GPU for `kv` ("rot4" or "kivi4/rot4"): the same rule
    (engine/hearth/cache_layout.py) and the same factory as the driver."""
    from engine.hearth.cache_layout import cache_layout
    from engine.hearth.caches import new_kv_cache

    cfg = model.config
    k_format, _, v_format = kv.removeprefix("paged-").partition("/")
    layout = cache_layout(k_format, v_format or k_format, kernels_on_gpu=True)
    return new_kv_cache(layout, n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv,
                        head_dim=cfg.head_dim, n_ctx=n_ctx, device=DEVICE)  # fmt: skip


def fill_randomly(model: Transformer, cache, depth: int) -> None:
    """`depth` positions of random K and V in every layer, written as a prefill writes them."""
    cfg = model.config
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    chunk = 4096
    for start in range(0, depth, chunk):
        n = min(chunk, depth - start)
        positions = torch.arange(start, start + n, device=DEVICE)
        for layer in range(cfg.n_layer):
            k, v = (
                torch.randn(n, cfg.n_head_kv, cfg.head_dim, device=DEVICE, generator=gen) * 0.5
                for _ in range(2)
            )
            cache.write(layer, positions, k, v)
    sync()


def kv_bytes_read(model: Transformer, cache, depth: int) -> int:
    """What one decode step's attention reads: the whole fixed-shape plain cache, or the
    filled pages of the paged one (a sliding-window layer's last `swa_window` positions only:
    gemma3, gpt-oss)."""
    if isinstance(cache, TorchKVCache):
        return cache.nbytes
    cfg = model.config
    positions = sum(
        min(depth, cfg.swa_window) if cfg.is_swa(i) else depth for i in range(cfg.n_layer)
    )
    return cache.spec.bytes_per_token * positions


def weight_bytes(model: Transformer) -> int:
    """The weight bytes one decode step reads: every dense matrix (a MoE layer's router and
    shared expert included), and of each MoE layer only the k experts the token picks (a
    token picks k distinct experts: top-k of n_expert), gate, up and down with their biases."""
    total = sum(_nbytes(w) for layer in model.layers for w in layer.matrices())
    moe = model.config.moe
    for layer in model.layers:
        if layer.moe is not None:
            total += moe.n_expert_used * expert_bytes(layer.moe.experts)
    return total + _nbytes(model.output)


def expert_bytes(experts) -> int:
    """One expert's bytes of gate, up and down (and their biases): kernels' ExpertWeight
    (ops.PackedExperts) or the stored QuantExperts (ops.ExpertWeights, TorchOps)."""
    total = 0
    for w in (experts.gate, experts.up, experts.down):
        bias = getattr(w, "bias", None)
        whole = w.packed.nbytes if hasattr(w, "packed") else w.nbytes
        total += whole // w.n_expert + (bias.nbytes // w.n_expert if bias is not None else 0)
    for bias in (getattr(experts, f"{kind}_bias", None) for kind in ("gate", "up", "down")):
        total += bias.nbytes // experts.n_expert if bias is not None else 0
    return total


def _nbytes(w) -> int:
    return w.nbytes if hasattr(w, "nbytes") else w.source.nbytes


def decode_tokens(
    model: Transformer, cache, first: int, position: int, n: int, graph, launch_ahead: bool = True
) -> float:
    """n greedy steps from `first` at `position`, each fed the last one's pick; seconds per
    token. With a graph: `launch_ahead` launches each next step before reading this one's token
    (what the worker does for greedy sampling; decode_graph.py)."""
    token = first
    sync()
    started = time.perf_counter()
    for i in range(n):
        if graph is not None:
            _, token = graph.step(token, position + i, launch_ahead=launch_ahead)
        else:
            logits = model.forward(
                torch.tensor([token], device=DEVICE),
                torch.tensor([position + i], device=DEVICE),
                cache,
                n_keys=cache.n_ctx,
            )
            token = int(torch.argmax(logits))
    if graph is not None:
        graph.forget_ahead()
    sync()
    return (time.perf_counter() - started) / n


def chunk_forward(model: Transformer, cache, graphs: bool | None = None):
    """forward(ids, start) of a prefill chunk at positions start.. as the worker runs it: replayed
    from CUDA graphs (engine/hearth/prefill_graph.py: a shape's first chunk eager, its second
    captured), or eagerly with HEARTH_PREFILL_GRAPH=0 (the driver's switch, read here too so
    that one GPU call measures both); `graphs` True or False overrides the switch."""
    from engine.hearth.prefill_graph import PrefillGraphs, prefill_graphs_wanted

    if graphs is None:
        graphs = prefill_graphs_wanted()
    if graphs and PrefillGraphs.can_capture(model, cache):
        return PrefillGraphs(model, cache).forward

    def forward(ids: torch.Tensor, start: int) -> torch.Tensor:
        positions = torch.arange(start, start + ids.shape[0], device=ids.device)
        return model.forward(ids, positions, cache, n_keys=start + ids.shape[0])

    return forward


def prefill_time(
    model: Transformer, n_tokens: int, runs: int = 5, warm: int = 8
) -> tuple[float, float, list[float]]:
    """(prefill seconds, time to the first token's id on the host), medians of `runs` after
    `warm` unmeasured ones, and every measured prefill time. The warm runs are many on
    purpose: the host launches this chunk's ~850 kernels (the GPU waits on it), and on the
    H100 machine the same chunk took 85-96 ms for the first six runs after the load and 50-54
    ms from the seventh on (benchmarks/prefill_profile.py); llama-bench too reports only runs
    after its warm-up."""
    cache = new_cache(model, "f16", n_tokens + 16)
    forward = chunk_forward(model, cache)
    rng = np.random.default_rng(1)
    pre, first = [], []
    for _ in range(runs + warm):
        ids = torch.tensor(rng.integers(0, model.config.n_vocab, n_tokens), device=DEVICE)
        sync()
        started = time.perf_counter()
        logits = forward(ids, 0)
        sync()
        mid = time.perf_counter()
        int(torch.argmax(logits))
        done = time.perf_counter()
        pre.append(mid - started)
        first.append(done - started)
    del cache
    return statistics.median(pre[warm:]), statistics.median(first[warm:]), pre[warm:]


def profile_step(model: Transformer, cache, position: int) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    def step():
        model.forward(
            torch.tensor([1], device=DEVICE),
            torch.tensor([position], device=DEVICE),
            cache,
            n_keys=cache.n_ctx,
        )

    step()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    rows = []
    for e in prof.key_averages():
        device_us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if device_us > 0:
            rows.append({"kernel": e.key[:90], "calls": e.count, "us": round(device_us, 1)})
    return sorted(rows, key=lambda r: -r["us"])


def measure(args) -> dict:
    started = time.perf_counter()
    torch.zeros(1, device=DEVICE)  # the CUDA context, outside the load's clock
    sync()
    cuda_init_s = time.perf_counter() - started
    free, total = torch.cuda.mem_get_info()
    result: dict = {"gpu": torch.cuda.get_device_name(), "copy_GBps": copy_rate() / 1e9}
    result["cuda_context_MiB"] = (total - free) / 2**20
    result["cuda_init_s"] = cuda_init_s
    started = time.perf_counter()
    info = read_model_info(args.model)
    tensors = GGUFTensors(args.model, info)
    model = Transformer.load(model_config(info), tensors, select_ops(DEVICE))
    sync()
    result["load_s"] = time.perf_counter() - started
    result["weights_GiB"] = torch.cuda.memory_allocated() / 2**30
    result["weight_bytes_read"] = weight_bytes(model)
    section(result, "prefill", lambda: measure_prefill(model, result))
    for kv in args.tg_kv:
        section(result, f"tg_{kv}", lambda kv=kv: measure_tg(model, args, kv, result))
    torch.cuda.empty_cache()
    for kv in args.kv:
        result[f"depth_{kv}"] = measure_depth(model, kv, args.depth, result["copy_GBps"])
    return result


def section(result: dict, name: str, run) -> None:
    """Run one part; a failure is recorded and printed, and the other parts still run."""
    try:
        run()
    except Exception as exc:
        result[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:400]
        print(f"{name} FAILED: {result[f'{name}_error']}", flush=True)


def measure_prefill(model: Transformer, result: dict) -> None:
    pp, ttft, runs = prefill_time(model, 512)
    result["pp512_tok_s"], result["ttft_512_ms"] = 512 / pp, ttft * 1e3
    result["pp512_runs_ms"] = [round(t * 1e3, 1) for t in runs]


def measure_tg(model: Transformer, args, kv: str, result: dict) -> None:
    from engine.hearth.decode_graph import DecodeGraph

    n = args.tokens
    out = result.setdefault("tg", {})[kv] = {}
    cache = new_cache(model, kv, 256 * ((n + 1 + 255) // 256))
    out["kv_slots"] = cache.n_ctx
    out["eager_tok_s"] = 1 / decode_tokens(model, cache, 1, 0, 16, None)
    if args.profile:
        out["profile"] = profile_step(model, cache, 5)
    table = model.device_embedding()  # made before "before": the pools are measured alone
    torch.cuda.empty_cache()  # (capturing empties the cache too: a fair "before")
    before = torch.cuda.memory_reserved()
    graph = DecodeGraph(model, cache, position=0)
    sync()
    out["graph_pool_MiB"] = (torch.cuda.memory_reserved() - before) / 2**20
    out["device_embedding_MiB"] = 0.0 if model.output_is_embedding else _nbytes(table) / 2**20
    decode_tokens(model, cache, 1, 0, 8, graph)  # warm
    per_token = decode_tokens(model, cache, 1, 0, n, graph)
    out["tok_s"] = 1 / per_token
    out["sequential_tok_s"] = 1 / decode_tokens(model, cache, 1, 0, n, graph, launch_ahead=False)
    out["replay_ms"] = graph.replay_seconds() * 1e3
    read = result["weight_bytes_read"] + kv_bytes_read(model, cache, n // 2)
    out["bound_fraction"] = read / per_token / (result["copy_GBps"] * 1e9)
    del graph, cache
    torch.cuda.empty_cache()


def measure_depth(model: Transformer, kv: str, depth: int, copy_gbps: float) -> dict:
    from engine.hearth.decode_graph import DecodeGraph

    out: dict = {"kv": kv, "depth": depth}
    try:
        cache = new_cache(model, kv, depth + 64)
        fill_randomly(model, cache, depth)
        out["kv_cache_GiB"] = cache.nbytes / 2**30
        graph = DecodeGraph(model, cache, position=depth)
        out["graph"] = True
        decode_tokens(model, cache, 1, depth, 4, graph)
        per_token = decode_tokens(model, cache, 1, depth, 32, graph)
        out["eager_tok_s"] = 1 / decode_tokens(model, cache, 1, depth, 4, None)
        out["tok_s"] = 1 / per_token
        read = weight_bytes(model) + kv_bytes_read(model, cache, depth)
        out["bound_fraction"] = read / per_token / (copy_gbps * 1e9)
    except Exception as exc:  # one format failing must not lose the others' figures
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    torch.cuda.empty_cache()
    return out


def llama_bench(model: str, depth: int) -> dict:
    """llama-bench's pp512 / tg128 and tg32 at `depth` (f16 KV), tokens per second, through
    `hearth bench`'s runner (engine/benchmark/llama_bench.py): the same command and parsing."""
    binary = find_llama_bench()
    if binary is None:
        raise LlamaBenchError("llama-bench is not on PATH: source the CUDA build's env.sh")
    out = {
        "pp512_tok_s": run_llama_bench(binary, model, prompt=512).tokens_per_second,
        "tg128_tok_s": run_llama_bench(binary, model, gen=128).tokens_per_second,
    }
    if depth:
        row = run_llama_bench(binary, model, gen=32, depth=depth, reps=1)
        out[f"tg32_at_{depth}_f16_tok_s"] = row.tokens_per_second
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.llama_ttft", model], capture_output=True, text=True
    )
    if done.returncode == 0:
        out.update(json.loads(done.stdout.strip().splitlines()[-1]))
    else:
        out["ttft_error"] = f"benchmarks.llama_ttft ended with {done.returncode}"
    return out


def report(result: dict) -> str:
    lines = [f"{k}: {v}" for k, v in result.items() if k.endswith("_error")]
    lines += [f"GPU: {result['gpu']}; copy {result['copy_GBps']:.0f} GB/s (read + written)"]
    llama = result.get("llama_bench", {})

    def beside(ours: float, key: str, higher_better: bool = True) -> str:
        """llama.cpp's figure and ours / theirs (a time: lower is better, ratio > 1 slower)."""
        theirs = llama.get(key)
        if not theirs:
            return ""
        ratio = ours / theirs
        word = "speed" if higher_better else "time"
        return f"   llama.cpp {theirs:.2f}  ->  our {word} {ratio:.2f}x theirs"

    lines.append(
        f"load {result['load_s']:.2f} s (+ {result['cuda_init_s']:.2f} s making the CUDA "
        f"context){beside(result['load_s'] + result['cuda_init_s'], 'load_s', False)}; weights "
        f"{result['weights_GiB']:.2f} GiB on the GPU; CUDA context "
        f"{result['cuda_context_MiB']:.0f} MiB"
    )
    pp = result["pp512_tok_s"]
    runs = result.get("pp512_runs_ms")
    spread = f" (runs {min(runs):.1f}-{max(runs):.1f} ms)" if runs else ""
    lines.append(f"pp512 {pp:.1f} tok/s{spread}{beside(pp, 'pp512_tok_s')}")
    ttft = result["ttft_512_ms"]
    lines.append(f"ttft (512-token prompt) {ttft:.1f} ms{beside(ttft, 'ttft_512_ms', False)}")
    for kv, tg in result.get("tg", {}).items():
        lines.append(
            f"tg{result['tokens']} KV {kv}: {tg['tok_s']:.1f} tok/s (graph; {tg['kv_slots']} "
            f"KV slots){beside(tg['tok_s'], 'tg128_tok_s')}; bandwidth-bound fraction "
            f"{tg['bound_fraction']:.0%}"
        )
        lines.append(
            f"   without launching ahead {tg['sequential_tok_s']:.1f} tok/s; graph replays "
            f"alone {tg['replay_ms']:.3f} ms/token ({1e3 / tg['replay_ms']:.1f} tok/s); eager "
            f"{tg['eager_tok_s']:.1f} tok/s; graph pools {tg['graph_pool_MiB']:.0f} MiB "
            f"(with the embedding table on the GPU: {tg['device_embedding_MiB']:.0f} MiB)"
        )
        for row in tg.get("profile", [])[:30]:
            lines.append(f"      {row['us']:9.1f} us  {row['calls']:4d}x  {row['kernel']}")
    for depth in (v for k, v in result.items() if k.startswith("depth_")):
        if "error" in depth:
            lines.append(f"depth {depth['depth']} {depth['kv']}: FAILED {depth['error']}")
            continue
        llama_key = f"tg32_at_{depth['depth']}_f16_tok_s"
        lines.append(
            f"depth {depth['depth']} KV {depth['kv']}: {depth['tok_s']:.1f} tok/s "
            f"({'graph' if depth['graph'] else 'eager'}; bound fraction "
            f"{depth['bound_fraction']:.0%}; eager {depth['eager_tok_s']:.1f}; "
            f"cache {depth['kv_cache_GiB']:.2f} GiB)"
            f"{beside(depth['tok_s'], llama_key)} (llama.cpp f16 KV)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--write-random", nargs=2, metavar=("SHAPE", "OUT"))
    parser.add_argument("--vocab", help="with --write-random: a llama.cpp vocabulary to copy")
    parser.add_argument(
        "--quant", default="Q4_K_M", help="with --write-random: the tensor types' mix (testkit)"
    )
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--depth", type=int, default=32768)
    parser.add_argument(
        "--kv",
        nargs="*",
        default=["paged-f16", "rot4", "q8/rot4"],
        help="KV formats at depth: f16 (the plain cache), paged-FMT or K/V (kernels' paged one)",
    )
    parser.add_argument(
        "--tg-kv", nargs="*", default=["paged-f16"], help="the KV formats of tg128 (as --kv)"
    )
    parser.add_argument("--llama-bench", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--load-runs", type=int, default=0)
    parser.add_argument("--worker-runs", type=int, default=0)
    parser.add_argument("--pick-s", type=float, default=hearth_speed_load.PICK_S)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.write_random:
        shape, out = args.write_random
        seconds = hearth_speed_files.write_random_quantized(
            out, shape, args.quant, vocab=args.vocab
        )
        print(f"wrote {out} in {seconds:.1f} s")
        return 0
    if not args.model:
        parser.error("a model is needed")
    if args.load_runs:
        loads = hearth_speed_load.measure_loads(args.model, args.load_runs)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(loads, f, indent=1)
        print(hearth_speed_load.report_loads(loads))
        return 0
    if args.worker_runs:
        loads = hearth_speed_load.measure_worker_loads(args.model, args.worker_runs, args.pick_s)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(loads, f, indent=1)
        print(hearth_speed_load.report_worker_loads(loads))
        return 0
    with torch.inference_mode():
        result = measure(args)
    result["tokens"] = args.tokens
    if args.llama_bench:
        result["llama_bench"] = llama_bench(args.model, args.depth)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    try:
        print(report(result))
    except KeyError as missing:  # a part failed: its error is in the figures
        print(f"(no table: {missing} was not measured)\n{json.dumps(result, indent=1)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
