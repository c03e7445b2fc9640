"""route_from_router (the router's GEMV, the top-k and the grouping in one launch) at the two
MoE models' routers, 1 and 2 tokens, by kernel variant (kernels/moe_router.RouterConfig):

    one-load the slab in one load, the tail's loads unrolled, the ranks from registers; a
             plain launch
    pdl      one-load as a dependent launch (the default): its weights loaded while the norm
             before it still runs

    python -m benchmarks.kernels.router

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


def main() -> int:
    if not cuda_banner():
        return 1
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
