"""route_from_router (the router's GEMV, the top-k and the grouping in one launch) at the two
MoE models' routers, 1 and 2 tokens, by kernel variant (kernels/moe_router.RouterConfig):

    one-load the slab in one load, the tail's loads unrolled, the ranks from registers; a
             plain launch
    pdl      one-load as a dependent launch (the default): its weights loaded while the norm
             before it still runs

    python -m benchmarks.kernels.router
    python -m benchmarks.kernels.router --sweep    # norm_and_route's tiles, a Qwen3 decode step
    python -m benchmarks.kernels.router --beside   # routing chosen before the FFN norm

--beside times, for Qwen3-30B-A3B's 48 layers in a graph (each its own wo, router and folded
rows, one token), what a decode step launches from wo's input to the experts' picks and
weights: wo's GEMV and norm_and_route, against router_scores, wo_and_scores and the FFN norm
computing the weights (kernels/router_beside_wo.py), and in how many layers both pick the
same experts (on random inputs a near-tie of the 8th and 9th logits may pick otherwise: the
engine's own check is the record's). Its first run: docs/measurements/2026-12-01-s38-call-1/
router.txt (H200, 6.28 us a layer against 8.48); the step's own A/B is
benchmarks/archive/2026-12-01-s37-beside-ab.py (docs/decisions/2026-12-01-routing-beside-wo.md).

The sweep times the launch a decode step makes (norm_and_route: the FFN norm, its residual
add, the router's GEMV, the top-k and the grouping in one launch), 48 Qwen3-30B-A3B layers in
a graph, one token, by RouterConfig: rows of the router a program (block_e), columns a
program (split), warps; every program loads the whole row for the norm's statistic anyway.

A graph replays one layer after another as a decode step has them, each with its own router
matrix (48 for Qwen3-30B-A3B, 24 for gpt-oss-20b, so that the matrices come from HBM): the
FFN norm (rms_norm_quantized, which lets a dependent launch in at its start) and the router
on the norm's output. The figure: the replay's time a layer, and that less the norms alone
(the same replay without the routers). The s16-call-4 profile of a Qwen3 decode step: the
router 6.1 us a launch, the norm ~2 us. The H200's figures (Triton 3.6) against the
kernel before (columns in steps, partials and ranks read in runtime loops, since deleted):
docs/decisions/0019-moe-routing-and-launch.md.
"""

from __future__ import annotations

import functools

import torch

from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.moe_router import RouterConfig, route_from_router
from kernels.norms import rms_norm_quantized
from kernels.packed_weight import PackedWeight

# name, experts, embedding, top-k, router bias, softmax over all experts (and normalized), layers
ROUTERS = [
    ("qwen3-30b-a3b", 128, 2048, 8, False, True, 48),
    ("gpt-oss-20b", 32, 2880, 4, True, False, 24),
]
TOKENS = (1, 2)
VARIANTS = {
    "one-load": RouterConfig(pdl=False),
    "pdl": RouterConfig(),
}


def _routers(n_expert: int, n_embd: int, layers: int) -> list[PackedWeight]:
    gen = torch.Generator().manual_seed(n_expert)
    out = []
    for _ in range(layers):
        w = torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5
        raw = w.numpy().view("uint8").reshape(-1)
        out.append(PackedWeight.from_gguf(raw, "F32", (n_expert, n_embd), device="cuda"))
    return out


def _layers(a, residual, norm, routers, k: int, kwargs: dict,
            config: RouterConfig | None) -> None:  # fmt: skip
    """One decode step's FFN norms, each followed by its layer's router (config None: the
    norms alone)."""
    for router in routers:
        y, _, _ = rms_norm_quantized(a, norm, 1e-6, residual)
        if config is not None:
            route_from_router(y, router, k, config=config, **kwargs)


# norm_and_route's tiles at Qwen3-30B-A3B's 128 x 2048 router: (block_e, split, warps)
SWEEP = [(4, 512, 4), (1, 2048, 4), (2, 1024, 4), (2, 2048, 4), (8, 256, 4), (4, 512, 2),
         (1, 2048, 2), (4, 2048, 4), (8, 512, 4)]  # fmt: skip


def sweep() -> None:
    """The decode step's norm_and_route by tile (SWEEP), us a layer and the picks."""
    from kernels.moe_router import norm_and_route

    name, n_expert, n_embd, k, _, softmax_all, layers = ROUTERS[0]
    routers = _routers(n_expert, n_embd, layers)
    norm = torch.rand(n_embd, device="cuda") + 0.5
    a = torch.randn(1, n_embd, device="cuda").half()
    residual = torch.randn(1, n_embd, device="cuda").half()
    kwargs = dict(softmax_all=softmax_all, normalize=softmax_all)

    def step(config: RouterConfig) -> None:
        for router in routers:
            norm_and_route(a, residual, norm, 1e-6, router, k, config=config, **kwargs)

    for block_e, split, warps in SWEEP:
        config = RouterConfig(block_e=block_e, split=split, num_warps=warps)
        us = time_calls(functools.partial(step, config), repeats=50) / layers * 1e6
        routed = norm_and_route(a, residual, norm, 1e-6, routers[0], k, config=config, **kwargs)
        picks = routed.routing.ids.tolist()
        print(f"{name} norm_and_route 1 token, {block_e} rows x {split} columns a program, "
              f"{warps} warps: {us:5.2f} us a layer, picks {picks}", flush=True)  # fmt: skip


def beside() -> None:
    """wo and the router's launch against the scores, wo's picks and the norm's weights, us a
    layer (module docstring)."""
    from kernels import reference
    from kernels.act_quant import quantize_activation
    from kernels.dequant import dequantize
    from kernels.gemv import default_config, quant_matmul
    from kernels.moe_router import norm_and_route
    from kernels.norms import RouteWeights
    from kernels.router_beside_wo import fold_router, router_scores, wo_and_scores

    name, n_expert, n_embd, k, _, softmax_all, layers = ROUTERS[0]
    n_in = 4096  # Qwen3-30B-A3B's 32 heads of 128
    routers = _routers(n_expert, n_embd, layers)
    norm = torch.rand(n_embd, device="cuda") + 0.5
    wos, folds = [], []
    for i, router in enumerate(routers):
        raw = reference.random_weight_bytes("Q4_K", n_embd, n_in, seed=i)
        wo = PackedWeight.from_gguf(raw, "Q4_K", (n_embd, n_in), device="cuda")
        dense = router.planes["w"].reshape(n_expert, n_embd)
        wos.append(wo)
        folds.append(fold_router(dense, norm, dequantize(wo, torch.float32)))
    a = torch.randn(1, n_in, device="cuda").half()
    residual = torch.randn(1, n_embd, device="cuda")
    q = quantize_activation(a)
    config = default_config("Q4_K", 1)
    kwargs = dict(softmax_all=softmax_all, normalize=softmax_all)

    def router_launch() -> list:
        picks = []
        for wo, router in zip(wos, routers, strict=True):
            out = quant_matmul(a, wo, config, quantized=q)
            picks.append(norm_and_route(out, residual, norm, 1e-6, router, k, **kwargs).routing)
        return picks

    def chosen_before() -> list:
        picks = []
        for wo, folded in zip(wos, folds, strict=True):
            parts = router_scores(q, folded, residual)
            out, picked = wo_and_scores(a, wo, q, parts, folded.offset, k, config)
            weights = torch.empty(1, k, dtype=torch.float32, device="cuda")
            route = RouteWeights(picked.scores, picked.top, weights, **kwargs)
            rms_norm_quantized(out, norm, 1e-6, residual, route=route)
            picks.append(picked)
        return picks

    launch_us = time_calls(router_launch, repeats=50) / layers * 1e6
    before_us = time_calls(chosen_before, repeats=50) / layers * 1e6
    # random inputs: a layer whose 8th and 9th logits nearly tie may pick otherwise, the
    # two paths summing in other orders (the engine's own check: the record's diagnose runs)
    same = sum(
        torch.equal(r.ids.int(), p.ids)
        for r, p in zip(router_launch(), chosen_before(), strict=True)
    )  # fmt: skip
    print(f"{name} 1 token, us a layer from wo's input to the picks and weights: wo and the "
          f"router's launch {launch_us:5.2f}, chosen before the norm {before_us:5.2f} "
          f"(the same picks in {same} of {layers} layers)", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import sys

    if not cuda_banner():
        return 1
    args = argv if argv is not None else sys.argv[1:]
    if "--sweep" in args:
        sweep()
        return 0
    if "--beside" in args:
        beside()
        return 0
    for name, n_expert, n_embd, k, has_bias, softmax_all, layers in ROUTERS:
        routers = _routers(n_expert, n_embd, layers)
        bias = torch.randn(n_expert, device="cuda") if has_bias else None
        norm = torch.rand(n_embd, device="cuda") + 0.5
        kwargs = dict(softmax_all=softmax_all, normalize=softmax_all, bias=bias)
        for tokens in TOKENS:
            a = torch.randn(tokens, n_embd, device="cuda").half()
            residual = torch.randn(tokens, n_embd, device="cuda").half()

            layer_run = functools.partial(_layers, a, residual, norm, routers, k, kwargs)
            norms_us = time_calls(functools.partial(layer_run, None), repeats=50) / layers * 1e6
            y, _, _ = rms_norm_quantized(a, norm, 1e-6, residual)
            picks = {}
            line = []
            for variant, config in VARIANTS.items():
                us = time_calls(functools.partial(layer_run, config), repeats=50) / layers * 1e6
                routing, _ = route_from_router(y, routers[0], k, config=config, **kwargs)
                picks[variant] = (routing.ids.tolist(), routing.order.tolist())
                line.append(f"{variant} {us:5.2f} ({us - norms_us:5.2f})")
            same = "same picks" if len({str(p) for p in picks.values()}) == 1 else "PICKS DIFFER"
            print(f"{name:14} {n_expert:3} x {n_embd} top-{k} {tokens} token(s), us a layer "
                  f"(less the norm {norms_us:4.2f}): {'  '.join(line)}   ({same})",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
