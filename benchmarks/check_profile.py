"""Where a speculative check's time goes on the Hearth engine (a GPU): the captured decode step
against the captured checks of 2, 4, 8 and 16 rows, on the GPU alone and with the host's part.

    python3 -m benchmarks.check_profile /tmp/starter/model.gguf --out DIR

For each size, after `--depth` tokens of context:
- gpu: the graph replayed back to back (CUDA events, no host work between): the GPU's own time,
  in plain steps (the decode graph replayed the same way);
- host: one check as the driver runs it (inputs copied, replayed, greedy picks read back), timed
  on the host, in plain steps (HearthContext.step, not launched ahead);
- kernels: the same forward run eagerly under torch.profiler, each kernel's GPU time summed by
  name: what grows with the rows (the matrices, the attention, the argmax).

A check that costs much more than its GPU time is the host's (the launch, the copies, the
sync); a GPU time that grows with the rows is the kernels'; the kernel table says which.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

SIZES = (2, 4, 8, 16)
REPLAYS = 50


def _graph_seconds(replay, device_sync, n: int = REPLAYS) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    device_sync()
    start.record()
    for _ in range(n):
        replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / n


def _kernel_table(run) -> dict[str, float]:
    """GPU microseconds per kernel name over one call of `run` (eager), after one untimed."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    table: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA"):
            table[event.name[:60]] += float(event.time_range.elapsed_us())
    return dict(table)


def _check_figures(ctx, transformer, token: int, depth: int, size: int, plain_gpu: float,
                   plain_host: float) -> dict:  # fmt: skip
    """One captured check of `size` copies of `token` at `depth`: its GPU and host time (in ms
    and plain steps), its kernels' GPU time by name (run eagerly) and its logits."""
    import torch

    from engine.hearth.check_graph import CheckGraph
    from engine.hearth.verify import check_logits

    graph = CheckGraph(transformer, ctx.cache, size, position=depth)
    gpu = _graph_seconds(graph.graph.replay, ctx.synchronize)
    hosts = []
    for _ in range(20):
        started = time.perf_counter()
        logits, _ = graph.run([token] * size, depth)
        hosts.append(time.perf_counter() - started)
    logits = logits.clone()
    host = statistics.median(hosts)

    def check_eagerly():
        with torch.inference_mode():
            rows = check_logits(transformer, ctx.cache, [token] * size, depth, fixed_shapes=True)
            torch.argmax(rows, dim=-1)

    return {"gpu_ms": gpu * 1e3, "gpu_steps": gpu / plain_gpu, "host_ms": host * 1e3,
            "host_steps": host / plain_host, "kernels_us": _kernel_table(check_eagerly),
            "logits": logits}  # fmt: skip


def profile_checks(model_path: str, depth: int) -> dict:
    import torch

    from engine.runtime import protocol as p
    from engine.runtime.hearth_driver import HearthModel
    from engine.runtime.speculative import trial

    params = p.ModelParams(path=model_path, n_ctx=depth + 64, engine="hearth")
    loaded = HearthModel(params)
    ctx = loaded.new_context(params)
    result: dict = {"depth": depth, "sizes": {}}
    try:
        ctx.warm_up()
        text = loaded.tokenize(trial.TRIAL_TEXT * 64, add_special=True)
        prompt = (text * (depth // max(1, len(text)) + 1))[:depth]
        ctx.decode(prompt)
        token = prompt[-1]
        for _ in range(3):  # the decode graph captured and warm
            ctx.step(token)
            ctx.forget_from(depth)
        ctx.synchronize()
        transformer, cache = loaded.hearth.transformer, ctx.cache
        plain_gpu = ctx._graph.replay_seconds(REPLAYS)
        hosts = []
        for _ in range(20):
            started = time.perf_counter()
            ctx.step(token)
            ctx.synchronize()
            hosts.append(time.perf_counter() - started)
            ctx.forget_from(depth)
        plain_host = statistics.median(hosts)
        device = loaded.hearth.device

        def decode_eagerly():
            with torch.inference_mode():
                transformer.forward(torch.tensor([token], device=device),
                                    torch.tensor([depth], device=device), cache,
                                    n_keys=cache.n_ctx)  # fmt: skip

        plain_kernels = _kernel_table(decode_eagerly)
        result["plain"] = {"gpu_ms": plain_gpu * 1e3, "host_ms": plain_host * 1e3,
                           "kernels_us": plain_kernels}  # fmt: skip
        print(f"plain step: gpu {plain_gpu * 1e3:.3f} ms, host {plain_host * 1e3:.3f} ms, "
              f"kernels {sum(plain_kernels.values()) / 1e3:.3f} ms "
              f"({len(plain_kernels)} names)", flush=True)  # fmt: skip
        plain_logits = ctx.step(token).logits.clone()
        ctx.forget_from(depth)
        sizes = result["sizes"]
        for size in SIZES:
            sizes[size] = _check_figures(ctx, transformer, token, depth, size, plain_gpu,
                                         plain_host)  # fmt: skip
            logits = sizes[size].pop("logits")
            sizes[size]["row_0_is_the_step"] = torch.equal(logits[0], plain_logits)
            print(f"check of {size:>2}: gpu {sizes[size]['gpu_steps']:5.2f} steps "
                  f"({sizes[size]['gpu_ms']:.3f} ms), host {sizes[size]['host_steps']:5.2f} "
                  f"steps ({sizes[size]['host_ms']:.3f} ms); row 0 = the step's bits: "
                  f"{sizes[size]['row_0_is_the_step']}", flush=True)  # fmt: skip
        _print_kernels(plain_kernels, {n: f["kernels_us"] for n, f in sizes.items()})
        return result
    finally:
        ctx.close()
        loaded.close()


def _print_kernels(plain: dict[str, float], checks: dict[int, dict[str, float]]) -> None:
    """The 25 kernels that take the longest in the largest check, each with its time in the
    plain step and in every check size."""
    sizes = sorted(checks)
    print(f"kernel GPU time by name, us (plain step, then checks of {sizes} rows):")
    names = set(plain).union(*(table.keys() for table in checks.values()))
    for name in sorted(names, key=lambda n: -checks[sizes[-1]].get(n, 0.0))[:25]:
        row = [plain.get(name, 0.0)] + [checks[s].get(name, 0.0) for s in sizes]
        print(f"  {name:<60} " + " ".join(f"{v:8.1f}" for v in row))
    totals = [sum(plain.values())] + [sum(checks[s].values()) for s in sizes]
    print(f"  {'all kernels':<60} " + " ".join(f"{v:8.1f}" for v in totals))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a GGUF the Hearth engine runs (the starter model)")
    parser.add_argument("--depth", type=int, default=512)
    parser.add_argument("--out", help="write the figures here (check-profile.json)")
    args = parser.parse_args(argv)
    result = profile_checks(args.model, args.depth)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "check-profile.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
