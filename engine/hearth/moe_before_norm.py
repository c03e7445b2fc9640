"""KernelsOps' routing of a one-token MoE step chosen before the FFN norm
(kernels/router_beside_wo.py): the router folded with the norm and wo at load, the scores
before wo and the picks in wo's launch, the routing weights in the norm's, then the expert
GEMV's one-token kernels on those picks. A mixin of moe_ops.KernelsMoeOps, whose
norm_and_moe_ffn takes _moe_ffn_beside where the forward pass brings the picks.
"""

from __future__ import annotations

import torch


class RoutingBeforeNorm:
    """_fold at load (KernelsMoeOps.fold_router's); matmul_and_scores and _moe_ffn_beside a
    step (engine/hearth/ops.py lists them)."""

    def _fold(self, layer, rule):
        """kernels.router_beside_wo.FoldedRouter of a layer whose experts are the expert
        GEMV's (moe_ops.PackedExperts: KernelsMoeOps.fold_router checks) and whose one-token
        step can route before its FFN norm (kernels/moe_one_token_rule.py's rule, wo on the
        integer GEMV, the folded values within float16), else None. Made on the device from wo
        dequantized (float32, dropped after)."""
        from kernels.dequant import dequantize
        from kernels.moe_one_token_rule import routes_beside_wo
        from kernels.router_beside_wo import fold_router

        moe, experts = layer.moe, layer.moe.experts
        parts = (experts.gate, experts.up, experts.down)
        takes = routes_beside_wo(
            wo_format=getattr(getattr(layer.wo, "fmt", None), "name", ""),
            router_format=getattr(getattr(moe.router, "fmt", None), "name", ""),
            n_expert_used=rule.n_expert_used, n_ff_exp=experts.down.n_in,
            router_bias=moe.router_bias is not None,
            expert_bias=any(w.bias is not None for w in parts),
            norm_after_attention=layer.post_attn_norm is not None,
            experts_on_device=not any(w.in_host_memory for w in parts),
        )  # fmt: skip
        if not takes or self._gemv_config(layer.wo, 1).path != "dp4a":
            return None
        router = moe.router.planes["w"].reshape(moe.router.n_out, moe.router.n_in)
        try:
            return fold_router(router, layer.ffn_norm, dequantize(layer.wo, torch.float32),
                               layer.bo)  # fmt: skip
        except self._k.UnsupportedTensor:  # past float16: the router's launch as before
            return None

    def matmul_and_scores(self, x: torch.Tensor, w, shared, folded, residual: torch.Tensor,
                          top_k: int):  # fmt: skip
        """(x @ w.T, the router's scores and top_k picks: kernels.router_beside_wo.ScoresBeside)
        of one row: the router's partial scores in a launch of their own (router_scores, from
        `shared`, x's 8-bit form the attention wrote, or x quantized here), then wo's GEMV
        and the picks in one launch (wo_and_scores). `folded` from fold_router, `residual`
        the stream wo's output is added to."""
        from kernels.router_beside_wo import router_scores, wo_and_scores

        if shared is None:  # a cache whose attention writes no 8-bit output
            shared = self._k.quantize_activation(x)
        parts = router_scores(shared, folded, residual)
        config = self._gemv_config(w, 1)
        return wo_and_scores(x, w, shared, parts, folded.offset, top_k, config)

    def _moe_ffn_beside(self, a, h, weight, eps: float, moe, rule, bias, picked):
        """norm_and_moe_ffn of one token whose picks came beside wo (matmul_and_scores): the
        norm computing their routing weights in its launch, then the expert GEMV's one-token
        kernels on those picks (no router launch, no grouping launch)."""
        from kernels.moe_routing import ExpertRouting
        from kernels.norms import RouteWeights

        weights = torch.empty(picked.ids.shape, dtype=torch.float32, device=a.device)
        route = RouteWeights(picked.scores, picked.top, weights,
                             softmax_all=rule.gating == "softmax",
                             normalize=rule.normalize)  # fmt: skip
        y, h, q = self._k.rms_norm_quantized(a, weight, eps, h, bias=bias, route=route)
        routing = ExpertRouting.one_token(picked.ids, weights, moe.experts.n_expert)
        f = self._expert_gemv(y, moe.experts, rule.n_expert_used, lambda _rows: routing, q)
        return f, y, h, q
