"""A MoE decode step routed beside wo (kernels/router_beside_wo.py, the default) against the
router's own launch (norm_and_route), in one process (2026-11-30-s29-step-ab.py's graph
replays of a step), and the two steps' logits over the same tokens:

    python benchmarks/archive/2026-12-01-s37-beside-ab.py MODEL OUTDIR \
        --variants main router-launch --rounds 2 --check 64

main            a one-token step's scores in wo's launch, the experts ranking them
router-launch   ops.scores_beside_wo = False: the FFN norm in the router's launch
--check N       N teacher-forced steps (random tokens, from an empty cache), each way of
                running them (graph or eager, dependent launches or not, either routing, and
                the router's GEMV after the norm's own launch: router-apart)
                against the router's launch in a graph: the logits' relative difference per
                step and whether the argmax agrees
--diagnose N    N eager steps routed beside wo, each MoE layer's picks set beside the router's
                launch on the same inputs (norm_and_route): whether they agree, the logits'
                largest difference, and the gap between the k-th and the next logit
"""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location(
    "step_ab", Path(__file__).with_name("2026-11-30-s29-step-ab.py")
)
step_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_ab)

_models: list = []
_load = step_ab.Transformer.load


def _capturing_load(*args, **kwargs):
    model = _load(*args, **kwargs)
    _models.append(model)
    return model


step_ab.Transformer.load = _capturing_load


def _beside(on: bool):
    def setup(cache) -> None:
        _models[0].ops.scores_beside_wo = on

    return setup


def _dependent_launches(on: bool) -> None:
    """Programmatic dependent launches on or off in every kernels module that asks."""
    import sys

    from kernels import launch

    for name, module in list(sys.modules.items()):
        if name.startswith("kernels") and hasattr(module, "has_dependent_launch"):
            module.has_dependent_launch = launch.has_dependent_launch if on else lambda d: False


def _teacher_forced(model, tokens, kv: str, slots: int, graph: bool) -> torch.Tensor:
    cache = step_ab.new_cache(model, kv, slots)
    device = model.ops.device
    rows = []
    if graph:
        decode = step_ab.DecodeGraph(model, cache, position=0)
        for i, token in enumerate(tokens):
            out, _ = decode.step(token, i, launch_ahead=False)
            rows.append(out.float().clone())
        del decode
    else:
        with torch.no_grad():
            for i, token in enumerate(tokens):
                out = model.forward(torch.tensor([token], device=device),
                                    torch.tensor([i], device=device), cache,
                                    n_keys=cache.n_ctx)  # fmt: skip
                rows.append(out.float().clone())
    del cache
    torch.cuda.empty_cache()
    return torch.stack(rows)


def check(n: int, kv: str, slots: int, out_dir: str) -> None:
    """Teacher-forced logits on the same random tokens: each way of running a step against
    the router's launch in a graph."""
    model = _models[0]
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, model.config.n_vocab, (n,), generator=gen).tolist()
    ways = {  # name: (routing beside wo, in a CUDA graph, dependent launches, router apart)
        "router-launch": (False, True, True, False),
        "main": (True, True, True, False),
        "main-eager": (True, False, True, False),
        "router-eager": (False, False, True, False),
        "main-no-pdl": (True, True, False, False),
        "router-no-pdl": (False, True, False, False),
        "router-apart": (False, True, True, True),
    }
    logits = {}
    ops = model.ops
    for name, (beside, graph, pdl, apart) in ways.items():
        ops.scores_beside_wo = beside
        _dependent_launches(pdl)
        if apart:  # the norm's own launch, the router's GEMV, then select_and_route
            from engine.hearth.ops import TorchOps

            ops.norm_and_moe_ffn = types.MethodType(TorchOps.norm_and_moe_ffn, ops)
            ops.moe_ffn_from_router = types.MethodType(TorchOps.moe_ffn_from_router, ops)
        logits[name] = _teacher_forced(model, tokens, kv, slots, graph)
        for method in ("norm_and_moe_ffn", "moe_ffn_from_router"):
            ops.__dict__.pop(method, None)
    _dependent_launches(True)
    b = logits["router-launch"]
    rows = {}
    for name, a in logits.items():
        rel = ((a - b).norm(dim=1) / b.norm(dim=1)).tolist()
        agree = (a.argmax(dim=1) == b.argmax(dim=1)).tolist()
        rows[name] = {"steps": n, "argmax_agree": sum(agree), "rel_diff_max": max(rel),
                      "rel_diff_median": sorted(rel)[n // 2],
                      "rel_diff": [round(r, 6) for r in rel]}  # fmt: skip
        print(name, json.dumps({k: v for k, v in rows[name].items() if k != "rel_diff"}))
    with open(f"{out_dir}/check.json", "w") as f:
        json.dump(rows, f, indent=1)


def diagnose(n: int, kv: str, slots: int, out_dir: str) -> None:
    """Per MoE layer and eager step: the picks beside wo against norm_and_route's."""
    model = _models[0]
    ops = model.ops
    ops.scores_beside_wo = True
    records = []
    original = type(ops)._moe_ffn_beside

    def beside_and_router(self, a, h, weight, eps, moe, rule, bias, picked):
        out = original(self, a, h, weight, eps, moe, rule, bias, picked)
        k = rule.n_expert_used
        r = self._k.norm_and_route(
            a, h, weight, eps, moe.router, k, softmax_all=rule.gating == "softmax",
            normalize=rule.normalize, bias=moe.router_bias, attn_bias=bias,
        )  # fmt: skip
        logits = r.logits[0].double()
        inv = 1 / torch.sqrt((r.h.double() ** 2).mean() + eps)
        ordered = logits.sort(descending=True).values
        ours, theirs = picked.ids.reshape(-1).tolist(), r.routing.ids.reshape(-1).tolist()
        z = picked.scores.double() * inv
        records.append({"same": ours == theirs, "same_set": set(ours) == set(theirs),
                        "gap": float(ordered[k - 1] - ordered[k]),
                        "diff": float((logits - z).abs().max()),
                        "spread": float(ordered[0] - ordered[-1])})  # fmt: skip
        return out

    ops._moe_ffn_beside = types.MethodType(beside_and_router, ops)
    cache = step_ab.new_cache(model, kv, slots)
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, model.config.n_vocab, (n,), generator=gen).tolist()
    device = ops.device
    with torch.no_grad():
        for i, token in enumerate(tokens):
            model.forward(torch.tensor([token], device=device), torch.tensor([i], device=device),
                          cache, n_keys=cache.n_ctx)  # fmt: skip
    del ops._moe_ffn_beside
    differ = [r for r in records if not r["same"]]
    summary = {"layer_steps": len(records), "same_order": len(records) - len(differ),
               "same_set": sum(r["same_set"] for r in records),
               "differing_gap_le_diff": sum(r["gap"] <= 2 * r["diff"] for r in differ),
               "median_diff_over_spread": sorted(r["diff"] / r["spread"] for r in records)[
                   len(records) // 2],
               "median_gap_over_spread": sorted(r["gap"] / r["spread"] for r in records)[
                   len(records) // 2]}  # fmt: skip
    with open(f"{out_dir}/diagnose.json", "w") as f:
        json.dump({"summary": summary, "records": records}, f, indent=1)
    print(json.dumps(summary), flush=True)


step_ab.VARIANTS.update({"main": _beside(True), "router-launch": _beside(False)})

if __name__ == "__main__":
    import sys

    def option(name: str) -> int:
        if name not in sys.argv:
            return 0
        at = sys.argv.index(name)
        value = int(sys.argv[at + 1])
        del sys.argv[at : at + 2]
        return value

    n_check, n_diagnose = option("--check"), option("--diagnose")
    if n_check or n_diagnose:
        _main = step_ab.main

        def main_with_check() -> None:
            original = step_ab.measure_variant
            done = []

            def measure(model, args, name, out_dir, round_):
                if not done:
                    if n_diagnose:
                        diagnose(n_diagnose, args.kv, args.slots, out_dir)
                    if n_check:
                        check(n_check, args.kv, args.slots, out_dir)
                    done.append(1)
                return original(model, args, name, out_dir, round_)

            step_ab.measure_variant = measure
            _main()

        main_with_check()
    else:
        step_ab.main()
