"""Experts in RAM, a split's x, ids and weights handed to the host by one kernel writing them
into pinned memory (kernels/step_to_host.py) against three device-to-host copies and the host
converting x after (the code before): both in one process, the decode graph's replays timed
alternately.

Loads Qwen3-30B-A3B as `benchmarks.moe_offload hearth` does (the last --ram-layers layers'
experts in RAM, --cpu-picks of a token's picks by ggml, the share kept: no tuning), captures
the decode step twice (the second with StagedExperts._publish put back to the copies and each
layer's ggml call converting x first), then --rounds times each: --steps replays, ms a step.

    python3 benchmarks/archive/2026-11-30-s34-publish-ab.py MODEL [--cpu-picks 4]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

sys.path.insert(0, ".")


def main() -> int:
    import torch

    from engine.gguf import read_model_info
    from engine.hearth import graph_pieces
    from engine.hearth.cache_layout import cache_layout
    from engine.hearth.caches import new_kv_cache
    from engine.hearth.config import model_config
    from engine.hearth.decode_graph import DecodeGraph
    from engine.hearth.expert_offload import ExpertPlacement
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import select_ops
    from engine.hearth.staged_experts import StagedExperts
    from engine.hearth.weights import GGUFTensors

    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--ram-layers", type=int, default=20)
    parser.add_argument("--cpu-picks", type=int, default=4)
    parser.add_argument("--cpu-threads", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()

    info = read_model_info(args.model)
    config = model_config(info)
    placement = ExpertPlacement(args.ram_layers, 0, on_cpu=False, cpu_threads=args.cpu_threads,
                                split_picks=args.cpu_picks)  # fmt: skip
    model = Transformer.load(config, GGUFTensors(args.model, info), select_ops("cuda"),
                             experts=placement)  # fmt: skip
    layout = cache_layout("f16", "f16", kernels_on_gpu=True)
    cache = new_kv_cache(layout, n_layer=config.n_layer, n_head_kv=config.n_head_kv,
                         head_dim=config.head_dim, n_ctx=1024, device="cuda")  # fmt: skip
    found = [layer.moe.experts for layer in model.layers if layer.moe is not None]
    staged = [e for e in found if isinstance(e, StagedExperts)]
    rng = random.Random(1234)
    graphs = {}
    with torch.inference_mode():
        prompt = torch.tensor([rng.randrange(config.n_vocab) for _ in range(64)], device="cuda")
        model.forward(prompt, torch.arange(64, device="cuda"), cache, n_keys=64)
        graphs["kernel"] = DecodeGraph(model, cache, position=64, tune_split=False)

        # box.x's address -> (box.x, x as the GPU had it, pinned): what the host converted
        raw: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        converting = [False]
        new_publish = StagedExperts.__dict__["_publish"]  # the staticmethod itself

        def copies(box, x, ids, weights):
            pair = raw.get(box.x.data_ptr())
            if pair is None:
                with torch.inference_mode(False):
                    held = torch.zeros(x.shape, dtype=x.dtype, pin_memory=True)
                pair = raw[box.x.data_ptr()] = (box.x, held)
            pair[1].copy_(x, non_blocking=True)
            box.ids.copy_(ids, non_blocking=True)
            box.weights.copy_(weights, non_blocking=True)

        class Converting:
            """ggml's call, after x converted on the host as the code before did."""

            def __init__(self, cpu):
                self.cpu = cpu

            def run_at(self, n, k, x, ids, weights, out):
                if converting[0]:
                    target, held = raw[x]
                    target.copy_(held)
                return self.cpu.run_at(n, k, x, ids, weights, out)

        for e in staged:
            e.cpu = Converting(e.cpu)
        StagedExperts._publish = staticmethod(copies)
        converting[0] = True
        graphs["copies"] = DecodeGraph(model, cache, position=64, tune_split=False)
        StagedExperts._publish = new_publish

        def seconds(name: str) -> float:
            converting[0] = name == "copies"
            pieces = graphs[name]._slots[0].pieces
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(args.steps):
                graph_pieces.replay(pieces, torch.device("cuda"))
            torch.cuda.synchronize()
            return (time.perf_counter() - started) / args.steps

        times = {name: [] for name in graphs}
        for _ in range(args.rounds):
            for name in graphs:
                times[name].append(seconds(name))
    print(f"{args.ram_layers} layers in RAM, split {args.cpu_picks} of "
          f"{config.moe.n_expert_used}, {args.steps} replays a round:")  # fmt: skip
    for name, ts in times.items():
        print(f"  {name:<7} ms a step: median {statistics.median(ts) * 1e3:.3f}, rounds "
              + ", ".join(f"{t * 1e3:.3f}" for t in ts))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
