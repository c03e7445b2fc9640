"""The Hearth engine's GPU memory, predicted (engine/planner/hearth_memory.py) against measured:
the memory table of issue 35 (three shapes x five K/V pairs on simulated 12 and 24 GiB cards,
each loaded and decoded at the context the planner plans there), and item by item.

    python -m benchmarks.hearth_memory --out DIR            # the table: about 5-6 minutes
    python -m benchmarks.hearth_memory cards --cards 12 24 --shapes llama3-8b mistral-7b
    python -m benchmarks.hearth_memory cards --cards 16 24 --shapes qwen3-30b-a3b  # experts in RAM
    python -m benchmarks.hearth_memory items --ctx 4096 32768   # each item, one shape

The models are Q4_K_M files written header-only ("sparse": the weights read as zeros, which
costs no disk and no download); memory depends on shapes and types only. The shapes:
Llama-3-8B (the one HEARTH_COSTS was calibrated on), Mistral-7B (a smaller vocabulary) and
Gemma-3-12B (head size 256, sliding-window layers, tied embeddings): the last two were not used
for calibration; Qwen3-30B-A3B (--shapes qwen3-30b-a3b: a mixture of experts, 17.3 GiB of
weights) is measured on request. A real file can be given with --model (cards: it replaces the
shapes).

cards: a memory hog (benchmarks/gpu_memory.py) holds all but N GiB of the GPU, as a smaller
card would; for each shape and K/V pair the planner's longest context on that card (the Model
page's budget: free memory less the safety margin) is loaded in a fresh process in the
driver's order (load, cache, the decode step captured, as the driver does at warm-up), the
cache is filled, and its last 520 positions are a real 512-token prefill chunk and 8 decode
steps, each attending over the whole cache. A mixture-of-experts model that does not fit all on
the GPU for a pair (longest context 0) is planned as the Hearth engine's plan does it when
nothing fits there (`hearth plan --engine hearth`; engine/planner/hearth_plan.py
longest_context_experts_in_ram): the longest context with every layer's experts in RAM, and at
that context the faster of the fewest layers read in place and the fewest with a cache of
experts. The row names the layers in RAM, the pinned bytes and the slots; the child loads with
that placement (engine/hearth/expert_offload.py ExpertPlacement, handed to Transformer.load as
the driver does), decodes in the CUDA graph when it reads in place and eagerly behind a cache,
as the driver does; the prediction is what stays on the GPU. Best fit keeps experts in RAM only
when no pair fits all on the GPU; here it is decided per pair (the same for Qwen3-30B-A3B on 16
and 24 GiB cards: no pair fits 16, every pair fits 24). Without the card's bandwidth the
placement's speed is judged at the planner's default, as `hearth plan --vram` does without
--bandwidth. Every load runs with torch's allocator as the worker runs it (expandable segments,
engine/hearth/allocator.py, unless PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF is set: each
row's JSON records it). Measured: the process's peak, NVML's used memory sampled every 1 ms
through the run less before the process started (the issue's bound is judged against it),
beside torch's peak reserved + the CUDA context and NVML's reading at the
end. The table gives predicted, the peak, the error ((predicted - peak) / peak; positive:
memory left idle), whether it is within max(3%, 128 MiB), torch's peak reserved less its peak
allocation (what its caching allocator held beside the live peak, which the model does not
count), and the share of the card the load really used. Cells not started within --budget-s
are listed as not run.

recheck: a recorded run's table (--json) with today's model's predictions.

items: one process loads the weights once through engine.hearth (Transformer.load with
select_ops: kernels/ on the GPU), then for each context and K/V pair makes the cache, fills
it (below), runs one 512-token prefill chunk at its end and 8 decode steps after it (in the
CUDA graph, where the engine has one); where the driver keeps prefill graphs, a chunk at
position 0 first runs twice (eagerly, then captured), so that their pool is there beside the
deep chunk as it is in a session. Each item is printed beside its prediction: weights
(torch's allocated bytes), KV cache, decode and prefill workspace (torch's peak allocation
above the cache), the CUDA context (NVML's used memory less torch's reserved), and the total
(NVML's used memory of the process).

How the cache is filled, honestly: K and V rows of random values are written straight into the
cache through the forward pass's own write call (kernels' write kernel for the paged cache, a
tensor copy for the plain one), not computed by a prefill of that many tokens: a real prefill
of 100k tokens of an 8B model would take most of the call's time. The prefill chunk and
decode steps that follow are real: they attend over every filled position, the largest
workspace the planner reserves. The cache is the one the driver builds
(engine/hearth/cache_layout.py engine_cache_layout, the rule the planner counts too).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.gpu_memory import device_used
from benchmarks.hearth_memory_engine import Engine, decode_graph
from benchmarks.hearth_memory_report import (
    GIB,
    MIB,
    allocator_slack,
    error_fraction,
    experts_text,
    markdown,
    measured_peak,
    mib,
    torch_peak,
)
from engine.gguf import read_model_info
from engine.hearth.allocator import ALLOC_CONF_NAMES, with_expandable_segments
from engine.planner import DeviceBudget, PlanRequest, safety_margin
from engine.planner.hearth_memory import HearthConfig, hearth_items
from engine.planner.hearth_plan import (
    ON_GPU,
    hearth_profile,
    longest_context,
    longest_context_experts_in_ram,
    pair_problem,
)
from engine.planner.hearth_weights import host_expert_bytes
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

PAIRS = (("f16", "f16"), ("q8", "q8"), ("q8", "rot4"), ("rot4", "rot4"), ("rot2", "rot4"))
CHUNK = 512
DECODE_STEPS = 8
# calibrated on (HEARTH_COSTS), then two shapes it was not: another vocabulary; head size 256,
# sliding-window layers and tied embeddings
SHAPES_MEASURED = ("llama3-8b", "mistral-7b", "gemma3-12b")
HOG = str(Path(__file__).with_name("gpu_memory.py"))


# -- part 1: each item, predicted and measured ----------------------------------------------------


def items(args) -> list[dict]:
    import torch

    before = device_used() or 0
    torch.zeros(1, device="cuda")
    engine = Engine(args.model)
    weights_allocated = torch.cuda.memory_allocated()
    weights_reserved = torch.cuda.memory_reserved()  # the load's raw copies still cached
    torch.cuda.empty_cache()
    weights_alone = torch.cuda.memory_reserved()  # the weights' own segments (rounding)
    profile = hearth_profile(engine.info)
    rows = []
    for n_ctx in args.ctx:
        for type_k, type_v in args.pairs:
            if pair_problem(profile, type_k, type_v):
                continue
            predicted = hearth_items(profile, HearthConfig(n_ctx, type_k, type_v, CHUNK))
            row = {"n_ctx": n_ctx, "type_k": type_k, "type_v": type_v}
            try:
                row.update(_measure(engine, n_ctx, type_k, type_v, weights_allocated))
                row["ok"] = True
            except torch.OutOfMemoryError as exc:
                row.update(ok=False, error=str(exc).splitlines()[0])
            row["used"] = (device_used() or 0) - before
            row["reserved"] = torch.cuda.memory_reserved()
            row["context"] = row["used"] - row["reserved"]
            row.update(weights=weights_allocated, weights_reserved_at_load=weights_reserved,
                       weights_reserved=weights_alone)  # fmt: skip
            row["predicted"] = {k: getattr(predicted, k) for k in predicted.__dataclass_fields__}
            row["predicted"]["gpu_total"] = predicted.gpu_total
            rows.append(row)
            print(_item_line(row), flush=True)
            torch.cuda.empty_cache()
    return rows


def _measure(engine: Engine, n_ctx: int, type_k: str, type_v: str, base: int) -> dict:
    torch = engine.torch
    torch.cuda.reset_peak_memory_stats()
    cache = engine.new_cache(n_ctx, type_k, type_v)
    engine.sync()
    kv = torch.cuda.memory_allocated() - base
    prefill = engine.can_prefill(cache)
    filled = n_ctx - DECODE_STEPS - (CHUNK if prefill else 0)
    out = {"kv": kv, "filled": filled}
    graphs = engine.prefill_graphs(cache, CHUNK) if prefill else None
    if graphs is not None:  # kept to the end: the driver keeps its graphs' pool as long
        out["prefill_graph_pool"] = torch.cuda.memory_allocated() - base - kv
    engine.fill(cache, filled)
    if prefill:  # one real prefill chunk at the end of the filled cache
        torch.cuda.reset_peak_memory_stats()
        engine.prefill_chunk(cache, filled, CHUNK)
        out["prefill_workspace"] = torch.cuda.max_memory_allocated() - base - kv
        filled += CHUNK
    torch.cuda.reset_peak_memory_stats()
    reserved = torch.cuda.memory_reserved()
    out["decode_tok_s"] = engine.decode(cache, filled, DECODE_STEPS)
    out["decode_workspace"] = torch.cuda.max_memory_allocated() - base - kv
    out["decode_reserved_growth"] = torch.cuda.memory_reserved() - reserved
    del graphs, cache
    return out


def _item_line(row: dict) -> str:
    p = row["predicted"]
    head = f"{row['n_ctx']:>7} K {row['type_k']:<4} V {row['type_v']:<4}"
    if not row["ok"]:
        return f"{head} FAILED: {row['error']}"
    return (
        f"{head} MiB pred/meas: weights {mib(p['weights'])}/{mib(row['weights'])} "
        f"(reserved {mib(p['weights_reserved'])}/{mib(row.get('weights_reserved'))}) "
        f"kv {mib(p['kv'])}/{mib(row['kv'])} decode {mib(p['decode_workspace'])}/"
        f"{mib(row['decode_workspace'])} prefill {mib(p['prefill_workspace'])}/"
        f"{mib(row.get('prefill_workspace'))} graph pool {mib(p['prefill_graph_pool'])}/"
        f"{mib(row.get('prefill_graph_pool'))} context {mib(p['context'])}/"
        f"{mib(row['context'])} total {mib(p['gpu_total'])}/{mib(row['used'])}"
    )


# -- part 2: simulated cards ----------------------------------------------------------------------


def start_hog(leave_bytes: int) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, HOG, "hog", str(leave_bytes)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise RuntimeError(f"the memory hog did not start: {line!r}")
    return proc, int(line.split()[1])


def cards(args) -> list[dict]:
    models = (
        {"file": args.model}
        if args.model_given
        else {shape: default_model(args.folder, shape) for shape in args.shapes}
    )
    began = time.perf_counter()
    rows = []
    for card in args.cards:
        proc, free = start_hog(int(card * GIB))
        try:
            margin = safety_margin(int(card * GIB))
            gpu = DeviceBudget("cuda0", f"{card:g} GiB card", "cuda", max(0, free - margin))
            request = PlanRequest(gpus=(gpu,), target_ctx=args.target_ctx, min_ctx=512)
            for shape, model in models.items():
                info = read_model_info(model)
                profile = hearth_profile(info)
                for type_k, type_v in args.pairs:
                    if pair_problem(profile, type_k, type_v):
                        continue
                    n_ctx, experts = plan_card(info, request, type_k, type_v)
                    row = {"card_gib": card, "shape": shape, "free": free, "margin": margin,
                           "budget": gpu.budget_bytes, "type_k": type_k, "type_v": type_v,
                           "n_ctx": n_ctx}  # fmt: skip
                    config = HearthConfig(n_ctx, type_k, type_v, CHUNK, 1, *experts)
                    if experts != ON_GPU:
                        row.update(ram_layers=experts[0], slots=experts[1],
                                   n_layer=profile.config.n_layer,
                                   host_bytes=host_expert_bytes(profile, config))  # fmt: skip
                    if n_ctx:
                        row["predicted_total"] = hearth_items(profile, config).gpu_total
                        if time.perf_counter() - began > args.budget_s:
                            row.update(ok=False, error=f"not run: past {args.budget_s:.0f} s")
                        else:
                            row.update(
                                _verify_in_child(model, n_ctx, type_k, type_v, experts=experts)
                            )
                    rows.append(row)
                    print(_card_line(row), flush=True)
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
    return rows


def plan_card(info, request: PlanRequest, type_k: str, type_v: str) -> tuple[int, tuple[int, int]]:
    """(context, (layers whose experts stay in RAM, cache slots per such layer)) for this pair
    on the request's card: the longest context all on the GPU (longest_context); for a
    mixture-of-experts model that does not fit there, the longest context with experts in RAM
    and the placement there, as the Hearth engine's plan (`hearth plan --engine hearth`)
    makes it when nothing fits on the GPU alone (longest_context_experts_in_ram)."""
    n_ctx = longest_context(info, request, type_k, type_v)
    if n_ctx:
        return n_ctx, ON_GPU
    n_ctx, experts = longest_context_experts_in_ram(info, request, type_k, type_v)
    # the layers' experts leave the GPU alike whoever computes them (the CPU placements' own
    # host copies aside): measured here read in place
    return n_ctx, experts[:2]  # dense: (0, ON_GPU)


def _verify_in_child(
    model: str, n_ctx: int, type_k: str, type_v: str, experts: tuple[int, int] = ON_GPU
) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.hearth_memory", "verify", "--model", model,
           "--n-ctx", str(n_ctx), "--kv", f"{type_k}/{type_v}",
           "--ram-layers", str(experts[0]), "--slots", str(experts[1])]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "no answer within 150 s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"ok": False, "error": f"exit {proc.returncode}: {tail}"}


def verify(args) -> int:
    """One load at args.n_ctx in this (fresh) process, in the driver's order
    (engine/runtime/hearth_driver.py): load (the last args.ram_layers layers' experts in RAM,
    args.slots cached each, as the driver places them), make the cache, capture the decode step (the
    driver does at warm-up, before any prompt: the capture empties torch's cache, so a
    prefill's buffers after it stay reserved, as they do in the worker), make the prefill
    graphs' pool as a session's first prompts do (Engine.prefill_graphs: a 512-token chunk at
    position 0, eagerly and then captured, where the driver keeps prefill graphs), fill the
    cache, a 512-token prefill chunk at its end, 8 decode steps. One JSON line: NVML's used memory
    sampled through the run (its peak: what the issue's bound is judged against), torch's
    peak reserved and allocated, the CUDA context (NVML's used memory less torch's reserved
    at the end, synchronized: CUDA, cuBLAS and the Triton modules loaded by then) and NVML's
    reading at the end; each less the device's use before this process started."""
    import torch

    from benchmarks.gpu_memory import PeakSampler

    type_k, type_v = _pair(args.kv[0])
    before = device_used() or 0
    out: dict = {"ok": False}
    out["alloc_conf"] = {name: os.environ[name] for name in ALLOC_CONF_NAMES if name in os.environ}
    with PeakSampler() as sampler:
        try:
            engine = Engine(args.model, experts=(args.ram_layers, args.slots))
            cache = engine.new_cache(args.n_ctx, type_k, type_v)
            out["prefill"] = engine.can_prefill(cache)
            filled = args.n_ctx - DECODE_STEPS - (CHUNK if out["prefill"] else 0)
            start = filled + (CHUNK if out["prefill"] else 0)
            graph = decode_graph(engine, cache, start)
            # a session's first prompts: the prefill graphs' pool, kept beside the deep chunk
            graphs = engine.prefill_graphs(cache, CHUNK) if out["prefill"] else None
            out["prefill_graphs"] = graphs is not None
            engine.fill(cache, filled)
            if out["prefill"]:  # the last 512-token chunk of a prefill, over the whole cache
                engine.prefill_chunk(cache, filled, CHUNK)
            out["decode_tok_s"] = engine.decode(cache, start, DECODE_STEPS, graph)
            out["ok"] = True
        except torch.OutOfMemoryError as exc:
            out["error"] = "out of GPU memory: " + str(exc).splitlines()[0][:160]
        torch.cuda.synchronize()
    end = (device_used() or 0) - before
    out["used"] = end
    out["context"] = end - torch.cuda.memory_reserved()
    out["peak_reserved"] = torch.cuda.max_memory_reserved()
    out["peak_allocated"] = torch.cuda.max_memory_allocated()
    out["nvml_peak"] = sampler.peak - before if sampler.peak is not None else None
    out["nvml_samples"] = sampler.samples
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


def _card_line(row: dict) -> str:
    pair = f"K {row['type_k']:<4} V {row['type_v']:<4}"
    head = f"{row['card_gib']:>4g} GiB {row.get('shape', ''):<12} {pair}"
    if not row["n_ctx"]:
        return f"{head} nothing fits"
    verdict = "decoded" if row.get("ok") else f"FAILED ({row.get('error')})"
    error = ""
    peak = measured_peak(row)
    if row.get("ok") and peak:
        error = f" error {100 * error_fraction(row['predicted_total'], peak):+.1f}%"
    experts = f" ({experts_text(row)})" if row.get("ram_layers") else ""
    return (
        f"{head} planned {row['n_ctx']:>7} tokens{experts}, predicted "
        f"{mib(row['predicted_total'])} "
        f"MiB, peak {mib(peak)} MiB (NVML {mib(row.get('nvml_peak'))}, torch reserved + "
        f"context {mib(torch_peak(row))}, beyond allocated {mib(allocator_slack(row))}, "
        f"NVML at the end {mib(row.get('used'))}) of "
        f"{mib(row['free'])} free{error}: {verdict}"
    )


# -- what the measurements say of HEARTH_COSTS ---------------------------------------------------


def suggested_costs(item_rows: list[dict], model: str) -> dict:
    """HEARTH_COSTS as the measured items put them: the CUDA context (median), and whether the
    prefill's scores were materialized (the measured growth of the prefill workspace between
    the shortest and the longest context, against both predictions)."""
    import dataclasses
    import statistics

    from engine.planner.hearth_memory import HEARTH_COSTS

    rows = [r for r in item_rows if r.get("ok") and r.get("prefill_workspace") is not None]
    out: dict = {}
    contexts = [r["context"] for r in item_rows if r.get("ok")]
    if contexts:
        out["context_bytes"] = int(statistics.median(contexts))
    profile = hearth_profile(read_model_info(model))
    by_pair: dict = {}
    for r in rows:
        by_pair.setdefault((r["type_k"], r["type_v"]), []).append(r)
    growth = []
    for (k, v), found in by_pair.items():
        if len(found) < 2:
            continue
        lo, hi = min(found, key=lambda r: r["n_ctx"]), max(found, key=lambda r: r["n_ctx"])
        measured = hi["prefill_workspace"] - lo["prefill_workspace"]
        predictions = {}
        for materialized in (True, False):
            costs = dataclasses.replace(HEARTH_COSTS, prefill_scores_materialized=materialized)
            at = [hearth_items(profile, HearthConfig(r["n_ctx"], k, v, CHUNK), costs)
                  for r in (lo, hi)]  # fmt: skip
            predictions[materialized] = at[1].prefill_workspace - at[0].prefill_workspace
        growth.append(min(predictions, key=lambda m: abs(predictions[m] - measured)))
    if growth:
        out["prefill_scores_materialized"] = statistics.mode(growth)
    return out


def recheck(path: str, context: int) -> list[dict]:
    """A recorded run's cards (hearth-memory.json) with today's model's prediction: each row's
    predicted_total recomputed, the recorded one kept as predicted_then. A row from a run that
    read NVML at the end only is measured as torch's peak allocation plus `context` (a lower
    bound of its peak: reserved >= allocated)."""
    rows = json.loads(Path(path).read_text())["cards"]
    profiles: dict = {}
    for r in rows:
        if not r.get("n_ctx"):
            continue
        if r["shape"] not in profiles:
            profiles[r["shape"]] = hearth_profile(read_model_info(default_model(
                "/tmp/hearth-memory", r["shape"])))  # fmt: skip
        config = HearthConfig(r["n_ctx"], r["type_k"], r["type_v"], CHUNK, 1,
                              r.get("ram_layers", 0), r.get("slots", 0))  # fmt: skip
        r["predicted_then"] = r["predicted_total"]
        r["predicted_total"] = hearth_items(profiles[r["shape"]], config).gpu_total
        if measured_peak(r) is None and r.get("peak_allocated"):
            r["peak_reserved"], r["context"] = r["peak_allocated"], context
    return rows


def default_model(folder: str, shape: str = "llama3-8b") -> str:
    path = Path(folder) / f"{shape}-Q4_K_M-sparse.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_sparse_gguf(path, SHAPES[shape], "Q4_K_M")
    return str(path)


def _pair(text: str) -> tuple[str, str]:
    k, _, v = text.partition("/")
    return k, v or k


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", nargs="?", default="cards",
                        choices=("all", "items", "cards", "verify", "recheck"))  # fmt: skip
    parser.add_argument("--json", help="recheck: a recorded hearth-memory.json")
    parser.add_argument("--context-mib", type=float, default=621,
                        help="recheck: the CUDA context for rows measured without one")  # fmt: skip
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=list(SHAPES_MEASURED),
        choices=sorted(SHAPES),
        help="cards: the sparse files' shapes",
    )
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="cards: start no load after this many seconds")  # fmt: skip
    parser.add_argument("--model", help="GGUF (default: a sparse Llama-3-8B Q4_K_M)")
    parser.add_argument("--ctx", type=int, nargs="+", default=[4096, 32768])
    parser.add_argument("--kv", nargs="+", default=[f"{k}/{v}" for k, v in PAIRS],
                        help="K/V pairs, e.g. q8/rot4")  # fmt: skip
    parser.add_argument("--cards", type=float, nargs="+", default=[12, 24])
    parser.add_argument("--target-ctx", type=int, default=262144)
    parser.add_argument("--n-ctx", type=int, default=4096, help="verify: the context")
    parser.add_argument("--ram-layers", type=int, default=0,
                        help="verify: the last N layers' experts in RAM (MoE)")  # fmt: skip
    parser.add_argument("--slots", type=int, default=0,
                        help="verify: each such layer's cached experts (0: in place)")  # fmt: skip
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    # torch's allocator as the worker runs it (EngineClient starts it so), in this process and
    # the loads' children, set before either imports torch
    os.environ.update(with_expandable_segments(os.environ))
    args.folder = "/tmp/hearth-memory"
    args.model_given = args.model is not None
    args.model = args.model or default_model(args.folder)
    if args.part == "verify":
        return verify(args)
    if args.part == "recheck":
        rows = recheck(args.json, int(args.context_mib * MIB))
        print(markdown([], rows))
        print(
            "\nRows recorded without a peak are measured here as torch's peak allocation + "
            f"{args.context_mib:g} MiB of CUDA context: a lower bound of their peak."
        )
        return 0
    args.pairs = [_pair(p) for p in args.kv]
    item_rows = items(args) if args.part in ("all", "items") else []
    card_rows = cards(args) if args.part in ("all", "cards") else []
    table = markdown(item_rows, card_rows)
    if item_rows:
        table += f"\n\nsuggested HEARTH_COSTS: {suggested_costs(item_rows, args.model)}"
    print("\n" + table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hearth-memory.json").write_text(
        json.dumps({"items": item_rows, "cards": card_rows}, indent=1)
    )
    (out / "hearth-memory.md").write_text(table + "\n")
    return 0 if all(r.get("ok") for r in item_rows + card_rows if r.get("n_ctx")) else 1


if __name__ == "__main__":
    sys.exit(main())
