"""route_from_router (the router's GEMV, the top-k and the grouping in one launch) at the two
MoE models' routers, by each selection (kernels/moe_routing.py: "rank" or "argmax"), at 1, 2
and 4 tokens.

    python -m benchmarks.kernels.router

A graph replay runs one call a layer, each with its own router matrix (48 for Qwen3-30B-A3B,
24 for gpt-oss-20b), so that the matrices come from HBM as in a decode step; the figure is the
replay's time over the calls. The profile of a Qwen3 decode step put this launch at 7.1 us
(docs/measurements/2026-11-29-s16-call-1/qwen3.txt), its GEMV at the copy rate at ~0.3 us.
"""

from __future__ import annotations

import torch

from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.moe_routing import route_from_router
from kernels.packed_weight import PackedWeight

# name, experts, embedding, top-k, router bias, softmax over all experts (and normalized)
ROUTERS = [
    ("qwen3-30b-a3b", 128, 2048, 8, False, True, 48),
    ("gpt-oss-20b", 32, 2880, 4, True, False, 24),
]
TOKENS = (1, 2, 4)


def _routers(n_expert: int, n_embd: int, layers: int) -> list[PackedWeight]:
    gen = torch.Generator().manual_seed(n_expert)
    out = []
    for _ in range(layers):
        w = torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5
        raw = w.numpy().view("uint8").reshape(-1)
        out.append(PackedWeight.from_gguf(raw, "F32", (n_expert, n_embd), device="cuda"))
    return out


def _per_call(x: torch.Tensor, routers: list[PackedWeight], k: int, kwargs: dict) -> float:
    """Seconds a call: a graph replay of one call a router, over the routers."""

    def run() -> None:
        for router in routers:
            route_from_router(x, router, k, **kwargs)

    return time_calls(run, repeats=50) / len(routers)


def main() -> int:
    if not cuda_banner():
        return 1
    for name, n_expert, n_embd, k, has_bias, softmax_all, layers in ROUTERS:
        routers = _routers(n_expert, n_embd, layers)
        bias = torch.randn(n_expert, device="cuda") if has_bias else None
        kwargs = dict(softmax_all=softmax_all, normalize=softmax_all, bias=bias)
        for tokens in TOKENS:
            x = torch.randn(tokens, n_embd, device="cuda").half()
            picks = {}
            line = []
            for selection in ("argmax", "rank"):
                us = _per_call(x, routers, k, dict(kwargs, selection=selection)) * 1e6
                routing, _ = route_from_router(x, routers[0], k, selection=selection, **kwargs)
                picks[selection] = (routing.ids.tolist(), routing.order.tolist())
                line.append(f"{selection} {us:6.2f} us")
            same = "same picks" if picks["rank"] == picks["argmax"] else "PICKS DIFFER"
            print(f"{name:14} {n_expert:3} x {n_embd} top-{k} {tokens} token(s): "
                  f"{'   '.join(line)}   ({same})", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
