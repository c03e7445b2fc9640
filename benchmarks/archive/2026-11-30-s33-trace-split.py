"""Experts in RAM, a split's decode steps under torch.profiler: where each pause's time goes.

Loads a model as `benchmarks.moe_offload hearth` does (the last --ram-layers layers' experts in
RAM, --cpu-picks of a token's picks by ggml, the others copied to the GPU), runs the decode
graph's steps, traces --steps of them (CUPTI: kernels, copies, runtime and driver calls, on
every thread) and prints, for each pause, the times of its events from the end of the
device-to-host copy that ends the piece before it (the GPU done with the router):

    wake       the stepping thread's stream wait returns
    h2d        the experts' copies on the GPU, first start .. last end
    launch     the next piece's cudaGraphLaunch call
    gpu        each kernel of the next piece up to the next pause's device-to-host copy

    python3 benchmarks/archive/2026-11-30-s33-trace-split.py MODEL OUT_DIR [--steps 4]
    python3 benchmarks/archive/2026-11-30-s33-trace-split.py - - --analyse TRACE.json.gz

A tree where the copier launches the next piece (both threads waiting on events) is read by
analyse_event_waits instead.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import sys
import time

sys.path.insert(0, ".")


def load(args):
    import torch

    from engine.gguf import read_model_info
    from engine.hearth.cache_layout import cache_layout
    from engine.hearth.caches import new_kv_cache
    from engine.hearth.config import model_config
    from engine.hearth.decode_graph import DecodeGraph
    from engine.hearth.expert_offload import ExpertPlacement
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import select_ops
    from engine.hearth.weights import GGUFTensors

    info = read_model_info(args.model)
    config = model_config(info)
    placement = ExpertPlacement(args.ram_layers, 0, on_cpu=False, cpu_threads=args.cpu_threads,
                                split_picks=args.cpu_picks)  # fmt: skip
    ops = select_ops("cuda")
    model = Transformer.load(config, GGUFTensors(args.model, info), ops, experts=placement)
    layout = cache_layout("f16", "f16", kernels_on_gpu=True)
    cache = new_kv_cache(layout, n_layer=config.n_layer, n_head_kv=config.n_head_kv,
                         head_dim=config.head_dim, n_ctx=1024, device="cuda")  # fmt: skip
    rng = random.Random(1234)
    with torch.inference_mode():
        prompt = torch.tensor([rng.randrange(config.n_vocab) for _ in range(64)], device="cuda")
        model.forward(prompt, torch.arange(64, device="cuda"), cache, n_keys=64)
        graph = DecodeGraph(model, cache, position=64)
    return model, graph, rng, config


def host_parts(model) -> str:
    """The split layers' host steps so far, us each: ggml, the step, the copier's issue and
    launch (where this tree has them)."""
    from engine.hearth.staged_experts import StagedExperts

    found = [layer.moe.experts for layer in model.layers if layer.moe is not None]
    staged = [e for e in found if isinstance(e, StagedExperts)]
    n = sum(e.steps for e in staged) or 1
    area = staged[0].area
    text = (f"host steps {n}: ggml {sum(e.ggml_s for e in staged) / n * 1e6:.1f} us, "
            f"host step {sum(e.host_s for e in staged) / n * 1e6:.1f} us")  # fmt: skip
    if hasattr(area, "issue_s"):
        text += f", copier issue {area.issue_s / n * 1e6:.1f}, launch {area.launch_s / n * 1e6:.1f}"
    return text


def events(path: str) -> list[dict]:
    with gzip.open(path) if path.endswith(".gz") else open(path) as f:
        trace = json.load(f)
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def end(e: dict) -> float:
    return e["ts"] + e["dur"]


def analyse(evs: list[dict]) -> None:
    cat = lambda e: e.get("cat", "")  # noqa: E731
    name = lambda e: e.get("name", "")  # noqa: E731
    kernels = sorted((e for e in evs if cat(e) == "kernel"), key=lambda e: e["ts"])
    copies = sorted((e for e in evs if cat(e) == "gpu_memcpy"), key=lambda e: e["ts"])
    runtime = sorted((e for e in evs if cat(e) in ("cuda_runtime", "cuda_driver")),
                     key=lambda e: e["ts"])  # fmt: skip
    user = sorted((e for e in evs if name(e) == "hearth_ggml"), key=lambda e: e["ts"])
    names = sorted({name(e) for e in runtime})
    print("runtime/driver calls seen:", names)
    print("copy kinds:", sorted({name(e) for e in copies}))
    big = [e for e in copies if "HtoD" in name(e) and e.get("args", {}).get("bytes", 0) > 1 << 20]
    d2h = [e for e in copies if "DtoH" in name(e)]
    # a pause begins at the last DtoH copy before a stepping-thread stream sync returns
    syncs = [e for e in runtime if name(e) in ("cudaStreamSynchronize",)]
    drv_syncs = [e for e in runtime if name(e) == "cuStreamSynchronize"]
    issues = [e for e in runtime if name(e).startswith("cuMemcpyHtoDAsync")]
    launches = [e for e in runtime if name(e) == "cudaGraphLaunch"]
    rows = []
    for s in syncs:
        before = [c for c in d2h if end(c) <= end(s) + 1]
        if not before:
            continue
        t0 = end(before[-1])
        nxt = [c for c in d2h if c["ts"] > end(s)]
        t1 = end(nxt[0]) if nxt else None
        row = {"wake": end(s) - t0, "sync_call": s["ts"] - t0}
        cw = [e for e in drv_syncs if t0 - 5 <= end(e) <= end(s) + 200]
        if cw:
            row["cp_wake"] = end(cw[0]) - t0
        iss = [e for e in issues if t0 <= e["ts"] <= (t1 or 1e30)]
        if iss:
            row["cp_issue0"] = iss[0]["ts"] - t0
            row["cp_issue1"] = end(iss[-1]) - t0
        cp = [e for e in big if t0 <= e["ts"] <= (t1 or 1e30)]
        if cp:
            row["h2d0"] = cp[0]["ts"] - t0
            row["h2d1"] = end(cp[-1]) - t0
            row["h2d_n"] = len(cp)
            moved = sum(c["args"]["bytes"] for c in cp)
            row["h2d_gbps"] = moved / (end(cp[-1]) - cp[0]["ts"]) / 1e3
        g = [e for e in user if t0 <= e["ts"] <= (t1 or 1e30)]
        if g:
            row["ggml0"], row["ggml1"] = g[0]["ts"] - t0, end(g[0]) - t0
        la = [e for e in launches if e["ts"] >= end(s)]
        if la:
            row["launch0"], row["launch1"] = la[0]["ts"] - t0, end(la[0]) - t0
        if t1 is not None:
            row["next_d2h"] = t1 - t0
            ks = [k for k in kernels if t0 <= k["ts"] <= t1]
            after = [k for k in ks if cp and k["ts"] >= end(cp[-1]) - 1]
            if after:
                row["first_kernel"] = after[0]["ts"] - t0
                row["gpu_after_copies"] = t1 - end(cp[-1])
                row["kernels_after"] = [(k["name"][:40], round(k["ts"] - t0, 1),
                                         round(k["dur"], 1)) for k in after]  # fmt: skip
        rows.append(row)
    print(f"{len(rows)} pauses")
    keys = ["sync_call", "wake", "cp_wake", "cp_issue0", "cp_issue1", "h2d0", "h2d1", "h2d_gbps",
            "ggml0", "ggml1", "launch0", "launch1", "first_kernel", "gpu_after_copies",
            "next_d2h"]  # fmt: skip
    for k in keys:
        vals = [r[k] for r in rows if k in r]
        if vals:
            q = statistics.quantiles(vals, n=4) if len(vals) > 3 else [min(vals)] * 3
            print(
                f"  {k:18s} n {len(vals):4d} median {statistics.median(vals):8.1f}  "
                f"q1 {q[0]:8.1f} q3 {q[2]:8.1f} min {min(vals):8.1f} max {max(vals):8.1f}"
            )
    mid = [r for r in rows if "kernels_after" in r]
    if mid:
        r = mid[len(mid) // 2]
        print("one pause, in order (us from the DtoH copy's end):")
        for k in keys:
            if k in r:
                print(f"  {k:18s} {r[k]:8.1f}")
        for n, ts, dur in r["kernels_after"]:
            print(f"  kernel {n:40s} start {ts:8.1f} ran {dur:6.1f}")


def analyse_event_waits(evs: list[dict]) -> None:
    """The same pauses where both threads wait on each piece's event (the copier launching
    the next piece): the stepping thread is the one that waits most often; us from the router's
    copy to the host, medians over the pauses with at least three expert copies."""
    kernels = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    copies = sorted((e for e in evs if e.get("cat") == "gpu_memcpy"), key=lambda e: e["ts"])
    runtime = sorted((e for e in evs if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    waits = [e for e in runtime if e["name"] == "cudaEventSynchronize"]
    stepping = max({e["tid"] for e in waits}, key=lambda t: sum(e["tid"] == t for e in waits))
    d2h = [c for c in copies if "DtoH" in c["name"]]
    big = [c for c in copies if "HtoD" in c["name"] and c["args"].get("bytes", 0) > 1 << 20]
    copier_waits = [e for e in waits if e["tid"] != stepping]
    copier_launches = [
        e for e in runtime if e["name"] == "cudaGraphLaunch" and e["tid"] != stepping
    ]
    rows = []
    for s in (e for e in waits if e["tid"] == stepping):
        before = [c for c in d2h if end(c) <= end(s) + 1]
        after = [c for c in d2h if c["ts"] > end(s)]
        if not before or not after:
            continue
        t0, t1 = end(before[-1]), end(after[0])
        cp = [c for c in big if t0 <= c["ts"] <= t1]
        if len(cp) < 3:
            continue
        row = {"wake": end(s) - t0, "h2d0": cp[0]["ts"] - t0, "h2d1": end(cp[-1]) - t0,
               "next_d2h": t1 - t0}  # fmt: skip
        woke = [e for e in copier_waits if t0 - 5 <= end(e) <= t1]
        if woke:
            row["cp_wake"] = end(woke[0]) - t0
        launched = [e for e in copier_launches if t0 <= e["ts"] <= t1]
        if launched:
            row["launch0"], row["launch1"] = launched[0]["ts"] - t0, end(launched[0]) - t0
        for k in (k for k in kernels if end(cp[-1]) - 1 <= k["ts"] <= t1):
            for key, part in (("unpack", "unpack"), ("add", "add_published")):
                if part in k["name"]:
                    row[f"{key}0"], row[f"{key}1"] = k["ts"] - t0, end(k) - t0
            if "router" in k["name"]:
                row["router1"] = end(k) - t0
        rows.append(row)
    print(f"{len(rows)} pauses (the copier launching the next piece)")
    for key in ("wake", "cp_wake", "h2d0", "h2d1", "launch0", "launch1", "unpack0", "unpack1",
                "add0", "add1", "router1", "next_d2h"):  # fmt: skip
        got = [r[key] for r in rows if key in r]
        if got:
            print(f"  {key:10s} n {len(got):3d} median {statistics.median(got):7.1f} "
                  f"min {min(got):7.1f} max {max(got):7.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--ram-layers", type=int, default=20)
    parser.add_argument("--cpu-picks", type=int, default=3)
    parser.add_argument("--cpu-threads", type=int, default=15)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--analyse", help="only read this trace")
    args = parser.parse_args()
    if args.analyse:
        found = events(args.analyse)
        stream_waits = any(e.get("name") == "cudaStreamSynchronize" for e in found)
        (analyse if stream_waits else analyse_event_waits)(found)
        return
    import torch

    model, graph, rng, config = load(args)
    with torch.inference_mode():
        trace(args, graph, rng, config)
    print(host_parts(model))


def trace(args, graph, rng, config) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    position = 64
    for _ in range(24):  # warm
        graph.step(rng.randrange(config.n_vocab), position, launch_ahead=False)
        position += 1
    began = time.perf_counter()
    for _ in range(32):
        graph.step(rng.randrange(config.n_vocab), position, launch_ahead=False)
        position += 1
    print(f"untraced: {32 / (time.perf_counter() - began):.1f} tok/s")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            graph.step(rng.randrange(config.n_vocab), position, launch_ahead=False)
            position += 1
        torch.cuda.synchronize()
    path = f"{args.out}/split.trace.json"
    prof.export_chrome_trace(path)
    found = events(path)
    stream_waits = any(e.get("name") == "cudaStreamSynchronize" for e in found)
    (analyse if stream_waits else analyse_event_waits)(found)


if __name__ == "__main__":
    main()
