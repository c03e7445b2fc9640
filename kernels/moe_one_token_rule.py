"""Which MoE layers a decode step of one token routes before the FFN norm (the router folded
with the norm and wo: kernels/router_beside_wo.py, kernels/moe_picks.py), and what that costs
in device memory: torch-free, so that the planner (engine/planner/hearth_weights.py) and the
engine decide from the same facts.

A layer takes it where the scores are the router's logits up to the norm's positive factor and
the one-token expert kernels can read the picks:
    - the output projection in a format of the integer GEMV (WO_FORMATS) and no norm between
      it and the FFN norm (Gemma's post-attention norm);
    - a float router (ROUTER_FORMATS) without a bias (a bias added to the logits is not
      scaled with them: gpt-oss), experts without biases;
    - at most ONE_TOKEN_MAX_SLOTS picks and expert rows of at most ONE_SPLIT_RUNS runs of 16
      (the one-token down's shape: kernels/moe_one_token.py);
    - the layer's experts in device memory (not in RAM behind a cache, not on the CPU).
"""

from __future__ import annotations

# the router matrices llama.cpp keeps unquantized (ffn_gate_inp), which the fused router
# (kernels/moe_router.py) reads; a quantized one takes the GEMV, then select_and_route
ROUTER_FORMATS = ("F32", "F16", "BF16")
# the output projection's formats with an integer GEMV (gemv_dp4a.py) to compute scores beside
WO_FORMATS = ("Q4_K", "Q6_K")
# the most slots the one-token down takes (16 rows of 8 slots: its measured shape; a program
# of more rows would spill)
ONE_TOKEN_MAX_SLOTS = 8
# runs of 16 weights a program of the expert GEMV reads of each row at most (one split)
ONE_SPLIT_RUNS = 128


def routes_beside_wo(*, wo_format: str, router_format: str, n_expert_used: int,
                     n_ff_exp: int, router_bias: bool, expert_bias: bool,
                     norm_after_attention: bool, experts_on_device: bool) -> bool:  # fmt: skip
    """Whether a MoE layer's one-token step routes before its FFN norm (module docstring)."""
    return (
        wo_format in WO_FORMATS
        and router_format in ROUTER_FORMATS
        and n_expert_used <= ONE_TOKEN_MAX_SLOTS
        and n_ff_exp <= 16 * ONE_SPLIT_RUNS
        and not router_bias
        and not expert_bias
        and not norm_after_attention
        and experts_on_device
    )


def folded_bytes(n_expert: int, n_embd: int, n_in: int) -> list[int]:
    """The device allocations of one layer's folded router: its float16 rows [n_expert,
    n_embd + n_in] and its float32 offset [n_expert]."""
    return [n_expert * (n_embd + n_in) * 2, n_expert * 4]
