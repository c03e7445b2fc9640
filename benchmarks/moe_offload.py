"""A mixture-of-experts model with its experts in system RAM on a simulated smaller card: the
Hearth engine (engine/hearth/expert_offload.py) beside llama-bench's --n-cpu-moe settings at the
same free VRAM, with the planner's predictions beside both.

    python -m benchmarks.moe_offload --model QWEN3-30B-A3B.gguf --card 12 [--out DIR]

1. A memory hog (benchmarks/gpu_memory.py, as benchmarks/hearth_memory.py uses it) holds all
   but --card GiB of GPU 0 for the whole run.
2. The planner plans the Hearth engine for that card (the Model page's budget: free memory
   less the safety margin; --ctx tokens) both ways: the fewest layers whose experts the GPU
   reads in place over PCIe, and the fewest layers with the most cache slots that fit
   (engine/planner/hearth_offload.py), each with its predicted speed; and llama.cpp's own
   plan (its --n-cpu-moe count and predicted speed). Beside them, at the in-place count of
   layers: those layers' experts computed by the CPU (ggml, --cpu-threads; a host node in
   the decode graph: expert_offload.ExpertsOnCpu; --skip-cpu leaves it out), and the splits
   --split-picks names (c of a token's picks by ggml, the others copied to the GPU:
   engine/hearth/staged_experts.py; the decode graph in pieces, each pause timed in parts).
3. For each, in a child process (its memory given back when it ends): the pinned
   host -> device copy rate; the model loaded with that placement; 64 prompt tokens and 16
   decode steps to warm up; then tg128: 128 decode steps, each fed a random token (as
   llama-bench's tg does: a greedy loop over random weights settles on one token and would
   make every expert a cache hit) and its logits read on the host: through the decode
   step's CUDA graph where the placement allows it (in place, on the CPU, split), eagerly
   with a cache.
   Tokens/s, cache hits and misses per token, bytes copied per token, and the planner's
   prediction at the measured copy rate.
4. llama-bench tg128 (-fa 1, -ngl 99, --threads) at several --n-cpu-moe settings around the
   planner's, each at the same free VRAM: a setting that does not fit fails and says so.
With --rounds N, steps 3 and 4 run N times in turn, and the ratio compares the best Hearth
placement's median with the best setting's median (llama-bench's best moved between 80 and 108
tok/s over runs on one machine, docs/decisions/2026-11-30-experts-split-between-cpu-and-bus.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.hearth_memory import start_hog
from engine.gguf import read_model_info
from engine.planner import DeviceBudget, Planner, PlanRequest, safety_margin
from engine.planner.engine_choice import plan_engines
from engine.planner.hearth_memory import HearthConfig, hearth_estimate
from engine.planner.hearth_offload import (
    OFFLOAD_COSTS,
    choose_placement,
    fewest_ram_layers,
)
from engine.planner.hearth_plan import hearth_profile, plan_hearth, predicted_speed
from engine.planner.search import Search

GIB = 1024**3
MIB = 1024**2
H200_GBPS = 4800.0  # HBM3e, the nominal figure the planner's bandwidth model takes


def plan_for_card(model: str, budget: int, n_ctx: int, gpu_gbps: float) -> dict:
    info = read_model_info(model)
    gpu = DeviceBudget("cuda0", "simulated card", "cuda", budget, gpu_gbps, "9.0")
    request = PlanRequest(gpus=(gpu,), target_ctx=n_ctx, min_ctx=min(512, n_ctx),
                          host_budget_bytes=None)  # fmt: skip
    hearth = plan_hearth(info, request)
    llama = plan_engines(Planner([info]), request, "llama")
    out = {"budget": budget, "hearth_fits": hearth.fits, "llama_fits": llama.fits}
    if hearth.fits:
        c = hearth.choice
        out.update(n_ctx=c.n_ctx,
                   chosen=(c.n_cpu_expert_layers, c.expert_cache_slots, c.expert_cpu_picks),
                   placements=both_placements(info, request, c.n_ctx, gpu_gbps))  # fmt: skip
    else:
        out["hearth_reason"] = " ".join(hearth.reasons)
    if llama.fits:
        out.update(llama_ncmoe=llama.choice.n_cpu_expert_layers,
                   llama_ngl=llama.choice.n_gpu_layers,
                   llama_predicted=llama.tokens_per_second)  # fmt: skip
    return out


def both_placements(info, request: PlanRequest, n_ctx: int, gpu_gbps: float) -> list[dict]:
    """The fewest layers read in place, and the fewest layers with the most cache slots, that
    fit at n_ctx (f16 cache), each with the planner's predicted speed."""
    profile = hearth_profile(info)
    search = Search(request)
    moe, n = profile.config.moe, profile.config.n_layer

    def fits(ram: int, slots: int) -> bool:
        config = HearthConfig(
            n_ctx, "f16", "f16", min(512, n_ctx), ram_expert_layers=ram, expert_cache_slots=slots
        )
        return search.shortfall(hearth_estimate(profile, config)) <= 0

    found = []
    in_place = fewest_ram_layers(fits, n, 0)
    if in_place is not None:
        found.append((in_place, 0))
    cached = choose_placement(fits, n, moe.n_expert, moe.n_expert_used)
    if cached is not None:
        found.append(cached)
    return [
        {"ram_layers": ram, "slots": slots,
         "predicted": predicted_speed(profile, ("f16", "f16"), n_ctx, (ram, slots),
                                      gpu_gbps).tokens_per_second}
        for ram, slots in found
    ]  # fmt: skip


# -- the Hearth engine, in a child ----------------------------------------------------------------


def pinned_copy_gbps(torch) -> float:
    """Host (pinned) -> device copy rate of 256 MiB, median of 8, in GB/s."""
    src = torch.empty(256 * MIB, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 256 * MIB / statistics.median(times[2:]) / 1e9


def run_hearth(args) -> dict:
    import torch

    from engine.hearth import expert_offload
    from engine.hearth.cache_layout import cache_layout
    from engine.hearth.caches import new_kv_cache
    from engine.hearth.config import model_config
    from engine.hearth.expert_offload import ExpertPlacement, offload_stats
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import select_ops
    from engine.hearth.weights import GGUFTensors

    device = args.device
    gpu = device == "cuda"

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize()

    link = pinned_copy_gbps(torch) if gpu else OFFLOAD_COSTS.host_link_gbps
    info = read_model_info(args.model)
    config = model_config(info)
    k = config.moe.n_expert_used
    if not 0 <= args.cpu_picks <= k:
        raise ValueError(f"--cpu-picks {args.cpu_picks}: 0 to {k} of a token's picks")
    placement = ExpertPlacement(
        args.ram_layers, args.slots, on_cpu=args.cpu_picks == k, cpu_threads=args.cpu_threads,
        split_picks=args.cpu_picks if 0 < args.cpu_picks < k else 0,
    )  # fmt: skip
    ops = select_ops(device)
    tensors = GGUFTensors(args.model, info)
    started = time.perf_counter()
    model = Transformer.load(config, tensors, ops, experts=placement)
    sync()
    load_s = time.perf_counter() - started
    layout = cache_layout("f16", "f16", kernels_on_gpu=ops.name == "kernels" and gpu)
    cache = new_kv_cache(layout, n_layer=config.n_layer, n_head_kv=config.n_head_kv,
                         head_dim=config.head_dim, n_ctx=args.ctx, device=device)  # fmt: skip
    rng = random.Random(1234)
    n_prompt, n_warm = min(64, args.ctx // 4), min(16, args.ctx // 4)
    n_steps = min(128, args.ctx - n_prompt - n_warm)

    def token() -> int:
        return rng.randrange(config.n_vocab)

    graph = None
    with torch.inference_mode():
        prompt = torch.tensor([token() for _ in range(n_prompt)], device=device)
        model.forward(prompt, torch.arange(n_prompt, device=device), cache, n_keys=n_prompt)
        if gpu and not model.routes_on_host:  # in place: the decode step as the worker runs it
            from engine.hearth.decode_graph import DecodeGraph

            graph = DecodeGraph(model, cache, position=n_prompt, tune_split=not args.untuned_split)

        def steps(start: int, n: int) -> float:
            sync()
            began = time.perf_counter()
            for i in range(n):
                if graph is not None:
                    graph.step(token(), start + i, launch_ahead=False)  # reads its token
                    continue
                logits = model.forward(
                    torch.tensor([token()], device=device),
                    torch.tensor([start + i], device=device),
                    cache,
                    n_keys=cache.n_ctx,
                )
                int(torch.argmax(logits))  # the host reads each token, as the worker does
            sync()
            return time.perf_counter() - began

        steps(n_prompt, n_warm)  # warm-up: the decode kernels' first launches
        before = offload_stats(model.layers)
        host_before = host_time(model.layers)
        split_before = split_step_count(model.layers)
        parts_before = split_parts(model.layers, graph)
        switches_before = voluntary_switches()
        seconds = steps(n_prompt + n_warm, n_steps)
        switches = voluntary_switches() - switches_before
        after = offload_stats(model.layers)
        host_after = host_time(model.layers)
        host_calls, host_seconds = host_after[0] - host_before[0], host_after[1] - host_before[1]
        split_steps = split_step_count(model.layers) - split_before
        parts = {k: v - parts_before[k] for k, v in split_parts(model.layers, graph).items()}
    per_token = {k: (after[k] - before[k]) / n_steps for k in ("hits", "misses", "bytes_copied")}
    profile = hearth_profile(info)
    costs = dataclasses.replace(OFFLOAD_COSTS, host_link_gbps=link)
    experts = (args.ram_layers, args.slots)
    predicted = predicted_speed(profile, ("f16", "f16"), args.ctx, experts, args.gpu_gbps, costs,
                                cpu_picks=args.cpu_picks)  # fmt: skip
    on_cpu = [layer.moe.experts for layer in model.layers
              if layer.moe is not None and hasattr(layer.moe.experts, "errors")]  # fmt: skip
    return {
        "ok": True,
        "pinned_h2d_gbps": link,
        "load_s": load_s,
        "tg128_tok_s": n_steps / seconds,
        "steps": n_steps,
        "cuda_graph": graph is not None,
        # the split's share as the decode graph chose it here, and its timings
        # (engine/hearth/split_tuning.py)
        "split_tuning": graph.split_tuning.text() if graph and graph.split_tuning else "",
        "split_chosen": split_chosen(graph),
        "ram_layers": args.ram_layers,
        "slots": args.slots,
        "cpu_picks": args.cpu_picks,
        "k": k,
        "cpu_threads": args.cpu_threads,
        # ggml's time inside the host functions, per call (a layer's share of a token)
        "host_us_per_layer_token": host_seconds / host_calls * 1e6 if host_calls else 0.0,
        "host_calls_per_token": host_calls / n_steps,
        # a split's pauses (graph pieces' host steps), per token: one a layer in RAM
        "split_steps_per_token": split_steps / n_steps,
        # a split's pause in parts, us a layer in RAM: the stepping thread's wait for the
        # piece, its ggml, its wait for the copier after that, its whole host step; the
        # copier's time from its wait to the copies issued, and launching the next piece
        **{
            f"split_{k}_us": v / split_steps * 1e6 if split_steps else 0.0 for k, v in parts.items()
        },
        # the process's threads' sleeps (futex waits among them) over the timed steps, per
        # token; and its threads at the end: ggml's OpenMP teams show in both
        "voluntary_switches_per_token": switches / n_steps,
        "threads_in_process": len(os.listdir("/proc/self/task")),
        "openmp_threads_freed": expert_offload.FREE_MAIN_THREAD_OPENMP,
        "openmp_libraries": openmp_libraries(),
        "host_function_errors": [str(e) for layer in on_cpu for e in layer.errors()][:3],
        "hits_per_token": per_token["hits"],
        "misses_per_token": per_token["misses"],
        "mib_copied_per_token": per_token["bytes_copied"] / MIB,
        "copied_gbps": (after["bytes_copied"] - before["bytes_copied"]) / seconds / 1e9,
        "layers_cached": after["layers_cached"],
        "predicted_at_measured_link": predicted.tokens_per_second,
        "predicted_misses_per_token": predicted.misses_per_token,
        # read in place, every picked expert of a layer in RAM crosses the bus: its rate then
        "bus_gbps_if_in_place": predicted.link_bytes_per_token * n_steps / seconds / 1e9,
        "anon_huge_gib": anon_huge_pages() / GIB,
        "peak_allocated": torch.cuda.max_memory_allocated() if gpu else 0,
        "reserved": torch.cuda.memory_reserved() if gpu else 0,
    }


def split_chosen(graph) -> list[int]:
    """[cpu picks, early copies] the decode graph chose for a split; [] for no split."""
    tuning = graph.split_tuning if graph is not None else None
    return [tuning.chosen.cpu_picks, tuning.chosen.early_copies] if tuning else []


def split_parts(layers, graph) -> dict[str, float]:
    """Seconds so far of the split experts' pauses in parts (split_step_count's layers and the
    decode graph's waits)."""
    from engine.hearth.staged_experts import StagedExperts

    found = [layer.moe.experts for layer in layers if layer.moe is not None]
    staged = [e for e in found if isinstance(e, StagedExperts)]
    waited = graph.waits.seconds if graph is not None else 0.0
    areas = {id(e.area): e.area for e in staged}.values()
    return {
        "wait": waited,
        "early": sum(e.early_s for e in staged),
        "ggml": sum(e.ggml_s for e in staged),
        "issue_wait": sum(e.issue_wait_s for e in staged),
        "host": sum(e.host_s for e in staged),
        "copier_issue": sum(a.issue_s for a in areas),
        "copier_launch": sum(a.launch_s for a in areas),
    }


def anon_huge_pages() -> int:
    """Bytes of this process's anonymous memory on transparent huge pages (ggml's repacked
    experts, host_pages.py), from /proc/self/smaps_rollup; 0 where there is none to read."""
    try:
        text = Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1]) * 1024
    return 0


def split_step_count(layers) -> int:
    """The host steps the layers' split experts (staged_experts.StagedExperts) have run."""
    from engine.hearth.staged_experts import StagedExperts

    found = [layer.moe.experts for layer in layers if layer.moe is not None]
    return sum(e.steps for e in found if isinstance(e, StagedExperts))


def voluntary_switches() -> int:
    """The process's threads' voluntary context switches so far (/proc: those alive now)."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f
                             if line.startswith("voluntary_ctxt_switches"))  # fmt: skip
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return total


def openmp_libraries() -> list[str]:
    """The OpenMP runtimes mapped in this process (one libgomp: torch and ggml share it)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "gomp" in line or "libomp" in line}
    return sorted(paths)


def host_time(layers) -> tuple[int, float]:
    """(calls, seconds) of the host functions of the layers whose experts the CPU computes."""
    found = [
        layer.moe.experts.host_time()
        for layer in layers
        if layer.moe is not None and hasattr(layer.moe.experts, "host_time")
    ]
    return sum(c for c, _ in found), sum(s for _, s in found)


def hearth_in_child(args, placement: dict, n_ctx: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.moe_offload", "hearth", "--model", args.model,
           "--ram-layers", str(placement["ram_layers"]), "--slots", str(placement["slots"]),
           "--cpu-picks", str(placement.get("cpu_picks", 0)),
           "--cpu-threads", str(args.cpu_threads),
           "--ctx", str(n_ctx), "--gpu-gbps", str(args.gpu_gbps)]  # fmt: skip
    if args.untuned_split:
        cmd.append("--untuned-split")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.hearth_timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no answer within {args.hearth_timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-3:]
    return {"ok": False, "error": f"exit {proc.returncode}: {' | '.join(tail)}"}


# -- llama-bench ----------------------------------------------------------------------------------


def llama_bench(model: str, ncmoe: int, threads: int, timeout: float) -> dict:
    cmd = ["llama-bench", "-m", model, "-p", "0", "-n", "128", "-r", "2", "-fa", "1",
           "-ngl", "99", "-ncmoe", str(ncmoe), "-t", str(threads), "-o", "json"]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"ncmoe": ncmoe, "ok": False, "error": f"no answer within {timeout:.0f} s"}
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-2:])
        return {"ncmoe": ncmoe, "ok": False, "error": f"exit {done.returncode}: {tail}"}
    row = json.loads(done.stdout)[0]
    return {"ncmoe": ncmoe, "ok": True, "tg128_tok_s": float(row["avg_ts"])}


def settings_around(n: int, n_layer: int) -> list[int]:
    """The planner's --n-cpu-moe and its neighbours (fewer first: they may not fit), and all."""
    return sorted({max(0, min(n_layer, n + d)) for d in (-4, -2, 0, 2)} | {n_layer})


# -- the run --------------------------------------------------------------------------------------


def show(args) -> int:
    card = int(args.card * GIB)
    proc, free = start_hog(card)
    result: dict = {"card_gib": args.card, "free": free}
    try:
        budget = max(0, free - safety_margin(card))
        plan = plan_for_card(args.model, budget, args.ctx, args.gpu_gbps)
        result["plan"] = plan
        print(f"simulated card: {args.card:g} GiB, free {free / GIB:.2f} GiB, planner budget "
              f"{budget / GIB:.2f} GiB, context {args.ctx}", flush=True)  # fmt: skip
        runs: list[dict] = []
        placements: list[dict] = []
        if plan["hearth_fits"]:
            print(f"planner, Hearth: chose (layers in RAM, slots, picks on the CPU) = "
                  f"{tuple(plan['chosen'])}",
                  flush=True)  # fmt: skip
            placements = plan["placements"] + cpu_placements(args, plan)
            if args.skip_cache:
                placements = [p for p in placements if not p["slots"]]
            if args.skip_in_place:
                placements = [p for p in placements if p["slots"] or p.get("cpu_picks")]
            plan["placements"] = placements
        else:
            runs.append({"ok": False, "error": plan["hearth_reason"]})
            print(_hearth_text(runs[-1]), flush=True)
        n_layer = hearth_profile(read_model_info(args.model)).config.n_layer
        base = plan.get("llama_ncmoe", n_layer // 2)
        rows: list[dict] = []
        for round_ in range(args.rounds):
            if args.rounds > 1:
                print(f"round {round_ + 1} of {args.rounds}", flush=True)
            for placement in placements:
                print(f"  {_placement_text(placement)}: predicted "
                      f"{placement['predicted']:.1f} tok/s at "
                      f"{OFFLOAD_COSTS.host_link_gbps:g} GB/s", flush=True)  # fmt: skip
                runs.append({**hearth_in_child(args, placement, plan["n_ctx"]), "round": round_})
                print(_hearth_text(runs[-1]), flush=True)
            print(f"planner, llama.cpp: --n-cpu-moe {base}, predicted "
                  f"{plan.get('llama_predicted') or 0:.1f} tok/s", flush=True)  # fmt: skip
            for n in settings_around(base, n_layer) if args.ncmoe is None else args.ncmoe:
                row = {**llama_bench(args.model, n, args.threads, args.llama_timeout),
                       "round": round_}  # fmt: skip
                rows.append(row)
                text = f"{row['tg128_tok_s']:.1f} tok/s" if row["ok"] else f"failed: {row['error']}"
                print(f"llama-bench tg128 --n-cpu-moe {n}: {text}", flush=True)
        result["hearth"] = runs
        result["llama_bench"] = rows
        ours = _best_median(r for r in runs if r.get("ok"))
        best = _best_median(r for r in rows if r["ok"])
        if best and ours:
            ratio = ours["median"] / best["median"]
            result["ratio_to_best_llama"] = ratio
            result["best"] = {"hearth": ours, "llama": best}
            over = f", medians over {args.rounds} rounds" if args.rounds > 1 else ""
            print(f"best Hearth ({_placement_text(ours['run'])}: {ours['median']:.1f} tok/s) / "
                  f"best llama.cpp (--n-cpu-moe {best['run']['ncmoe']}: {best['median']:.1f})"
                  f"{over}: {ratio:.2f}x (the issue's target: >= 1.2x)",
                  flush=True)  # fmt: skip
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "moe_offload.json").write_text(json.dumps(result, indent=2))
    return 0 if any(r.get("ok") for r in result.get("hearth", ())) else 1


def _best_median(results) -> dict | None:
    """The setting (a Hearth placement, or an --n-cpu-moe) whose tg128 median over the rounds
    is the highest: {"median", "runs" (its tok/s by round), "run" (one of its results)}."""
    by_setting: dict[tuple, list[dict]] = {}
    for r in results:
        key = tuple(r.get(k) for k in ("ram_layers", "slots", "cpu_picks", "ncmoe"))
        by_setting.setdefault(key, []).append(r)
    scored = [
        {"median": statistics.median(r["tg128_tok_s"] for r in rs),
         "runs": [r["tg128_tok_s"] for r in rs], "run": rs[0]}
        for rs in by_setting.values()
    ]  # fmt: skip
    return max(scored, key=lambda s: s["median"], default=None)


def cpu_placements(args, plan: dict) -> list[dict]:
    """At the planner's in-place count of layers: every pick on the CPU (not with
    args.skip_cpu) and the splits args.split_picks names, each with the planner's prediction."""
    in_place = [p for p in plan["placements"] if not p["slots"]]
    if not in_place:
        return []
    profile = hearth_profile(read_model_info(args.model))
    k = profile.config.moe.n_expert_used
    n = in_place[0]["ram_layers"]
    picks = ([] if args.skip_cpu else [k]) + list(args.split_picks)
    rows = []
    for c in picks:
        predicted = predicted_speed(
            profile, ("f16", "f16"), plan["n_ctx"], (n, 0), args.gpu_gbps, cpu_picks=c
        )
        rows.append({"ram_layers": n, "slots": 0, "cpu_picks": c, "k": k,
                     "predicted": predicted.tokens_per_second})  # fmt: skip
    return rows


def _placement_text(p: dict) -> str:
    picks = p.get("cpu_picks", 0)
    if picks and picks < p.get("k", picks):
        return (
            f"experts of {p['ram_layers']} layers in RAM, {picks} of {p['k']} picks a token by "
            "the CPU beside the copy engine's of the others"
        )
    if picks:
        return f"experts of {p['ram_layers']} layers in RAM, computed by the CPU (a host node)"
    how = f"{p['slots']} cache slots each" if p["slots"] else "read in place"
    return f"experts of {p['ram_layers']} layers in RAM, {how}"


def _hearth_text(r: dict) -> str:
    if not r.get("ok"):
        return f"Hearth engine: failed: {r.get('error')}"
    how = "CUDA graph" if r["cuda_graph"] else "eager"
    return (
        f"Hearth engine, {_placement_text(r)} ({how}): tg128 {r['tg128_tok_s']:.1f} tok/s "
        f"(load {r['load_s']:.1f} s); per token {r['hits_per_token']:.1f} hits, "
        f"{r['misses_per_token']:.1f} misses (predicted {r['predicted_misses_per_token']:.1f} "
        f"crossing the bus), {r['mib_copied_per_token']:.0f} MiB copied "
        f"({r['copied_gbps']:.1f} GB/s over the run); pinned H2D {r['pinned_h2d_gbps']:.1f} "
        f"GB/s; planner's prediction at that rate {r['predicted_at_measured_link']:.1f} tok/s"
        + (
            ""
            if r["slots"] or r.get("cpu_picks")
            else f"; experts read in place at {r['bus_gbps_if_in_place']:.1f} GB/s over the run"
        )
        + _host_text(r)
    )


def _host_text(r: dict) -> str:
    if not r.get("cpu_picks"):
        return ""
    if r["cpu_picks"] < r["k"]:
        return (
            f"; {r['split_steps_per_token']:.1f} pauses a token (graph pieces' host steps), "
            f"us each: waiting for the piece {r['split_wait_us']:.0f}, early copies "
            f"{r['split_early_us']:.0f}, ggml "
            f"{r['split_ggml_us']:.0f}, waiting for the copier after it "
            f"{r['split_issue_wait_us']:.0f}, the host step {r['split_host_us']:.0f}; the "
            f"copier: from its wait to the copies issued {r['split_copier_issue_us']:.0f}, "
            f"launching the next piece {r['split_copier_launch_us']:.0f}; "
            f"{r['anon_huge_gib']:.2f} GiB on huge pages; {r['split_tuning']}"
        )
    text = (
        f"; ggml in the host functions {r['host_us_per_layer_token']:.0f} us a layer-token "
        f"({r['host_calls_per_token']:.0f} calls a token, {r['cpu_threads']} threads); "
        f"{r['voluntary_switches_per_token']:.0f} voluntary context switches a token, "
        f"{r['threads_in_process']} threads in the process"
    )
    if r["host_function_errors"]:
        text += f"; HOST FUNCTION ERRORS: {r['host_function_errors']}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="show", choices=("show", "hearth"))
    parser.add_argument("--model", required=True)
    parser.add_argument("--card", type=float, default=12.0, help="GiB left free (default 12)")
    parser.add_argument("--ctx", type=int, default=1024, help="context tokens (default 1024)")
    parser.add_argument("--gpu-gbps", type=float, default=H200_GBPS)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 16)
    parser.add_argument("--ram-layers", type=int, default=0)
    parser.add_argument("--slots", type=int, default=0)
    parser.add_argument(
        "--cpu-picks",
        type=int,
        default=0,
        help="hearth mode: picks a token the CPU computes: all (the model's k), none (0), or "
        "between (a split: the others copied to the GPU)",
    )
    parser.add_argument(
        "--split-picks",
        type=lambda text: [int(c) for c in text.split(",") if c],
        default=[],
        help="show: also run these splits (picks a token by the CPU while the others are "
        "copied to the GPU), e.g. 2,3,4",
    )
    parser.add_argument(
        "--skip-cpu",
        action="store_true",
        help="show: leave the placement with every pick on the CPU out",
    )
    parser.add_argument(
        "--cpu-threads",
        type=int,
        default=max(1, (os.cpu_count() or 16) - 1),
        help="ggml's threads for experts on the CPU (default: the cores less "
        "the one the step's own thread takes)",
    )
    parser.add_argument(
        "--keep-openmp-threads",
        action="store_true",
        help="hearth mode: leave the stepping thread's OpenMP team alive beside the host "
        "nodes' (expert_offload.FREE_MAIN_THREAD_OPENMP off: the step before the fix)",
    )
    parser.add_argument(
        "--skip-cache",
        action="store_true",
        help="show: leave the planner's cached placement out (its steps run eagerly: slow)",
    )
    parser.add_argument(
        "--skip-in-place",
        action="store_true",
        help="show: leave the placement reading every pick in place over the bus out",
    )
    parser.add_argument(
        "--ncmoe",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=None,
        help="show: llama-bench's --n-cpu-moe settings, e.g. 18,20 (default: around the "
        "planner's; empty: llama-bench not run)",
    )
    parser.add_argument(
        "--untuned-split",
        action="store_true",
        help="a split keeps the planned share of the picks, where the decode graph would time "
        "the shares around it and keep the fastest (engine/hearth/split_tuning.py)",
    )
    parser.add_argument("--device", default="cuda", help="hearth mode: cpu for a check")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="show: run every Hearth placement and llama-bench setting this many times, in "
        "turn, and compare the best medians (llama-bench's best moved 80-108 tok/s between "
        "runs on one machine)",
    )
    parser.add_argument("--hearth-timeout", type=float, default=150.0)
    parser.add_argument("--llama-timeout", type=float, default=60.0)
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args(argv)
    if args.mode == "hearth":
        if args.keep_openmp_threads:
            from engine.hearth import expert_offload

            expert_offload.FREE_MAIN_THREAD_OPENMP = False
        try:
            print(json.dumps(run_hearth(args)), flush=True)
        except Exception as exc:  # one JSON line either way: the parent reports it
            print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
            return 1
        return 0
    return show(args)


if __name__ == "__main__":
    sys.exit(main())
