"""Upper bounds for fewer launches a layer: a decode step with a launch taken out, its work's
result reused from the first step (so the step computes nothing right: for timing only), in one
process beside main (2026-11-30-s29-step-ab.py's graph replays of a tg128 step):

    python benchmarks/archive/2026-12-01-s36-ablate-ab.py MODEL OUTDIR \
        --variants main no-router no-attn-norm no-router-no-attn-norm --rounds 2

no-router           a mixture of experts' FFN norm launched plainly (rms_norm_quantized) and
                    the expert GEMV given the routing of the layer's first step: no router on
                    the step's path, and the gate/up, a dependent launch after the norm, reads
                    that routing and its weights before its wait (what a routing chosen
                    before the FFN norm would allow)
no-attn-norm        the attention norm's launch left out (the Q/K/V GEMV reads the first
                    step's 8-bit x): what a norm done inside the kernels around it would save
no-norms            the FFN norm of a dense layer left out too
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

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


def _fixed_routing(ops):
    """norm_and_moe_ffn with the FFN norm alone and each layer's first routing reused."""
    routings: dict = {}
    original = type(ops).norm_and_moe_ffn

    def norm_and_moe_ffn(self, readers, a, h, weight, eps, moe, rule, bias=None):
        if a.shape[0] != 1 or h is None:
            return original(self, readers, a, h, weight, eps, moe, rule, bias)
        k = rule.n_expert_used
        routing = routings.get(id(moe))
        if routing is None:
            r = self._k.norm_and_route(
                a, h, weight, eps, moe.router, k, softmax_all=rule.gating == "softmax",
                normalize=rule.normalize, bias=moe.router_bias, attn_bias=bias,
            )  # fmt: skip
            routing = routings[id(moe)] = r.routing
        y, h2, shared = self.rms_norm_for(readers, a, weight, eps, residual=h, bias=bias)
        f = self._expert_gemv(y, moe.experts, k, lambda _rows: routing, shared)
        return f, y, h2, shared

    return norm_and_moe_ffn


def _cached_norms(ops, weights: set[int]):
    """rms_norm_for that returns the first result for the norm weights in `weights`."""
    first: dict = {}
    original = type(ops).rms_norm_for

    def rms_norm_for(self, readers, x, weight, eps, residual=None, dtype=None, bias=None):
        if id(weight) not in weights or x.reshape(-1, x.shape[-1]).shape[0] != 1:
            return original(self, readers, x, weight, eps, residual, dtype, bias)
        if id(weight) not in first:
            first[id(weight)] = original(self, readers, x, weight, eps, residual, dtype, bias)
        return first[id(weight)]

    return rms_norm_for


def _variant(no_router: bool = False, norms: tuple[str, ...] = ()):
    def setup(cache) -> None:
        model = _models[0]
        ops = model.ops
        for name in ("norm_and_moe_ffn", "rms_norm_for"):
            ops.__dict__.pop(name, None)
        if no_router:
            ops.norm_and_moe_ffn = types.MethodType(_fixed_routing(ops), ops)
        if norms:
            weights = {id(getattr(layer, n)) for layer in model.layers for n in norms}
            ops.rms_norm_for = types.MethodType(_cached_norms(ops, weights), ops)

    return setup


step_ab.VARIANTS.update(
    {
        "main": _variant(),
        "no-router": _variant(no_router=True),
        "no-attn-norm": _variant(norms=("attn_norm",)),
        "no-router-no-attn-norm": _variant(no_router=True, norms=("attn_norm",)),
        "no-norms": _variant(norms=("attn_norm", "ffn_norm")),
    }
)

if __name__ == "__main__":
    step_ab.main()
