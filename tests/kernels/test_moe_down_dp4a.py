"""The one-token expert down as one integer GEMV over the k experts' rows side by side
(kernels/moe_down_dp4a.py) against kernels/moe_reference.py (float64, h rounded to 8 bits as
quantize_activation rounds it): both formats, k a power of two and not, rows not whole
tiles, the launch shapes the benchmark compares."""

from __future__ import annotations

import pytest
import torch

from kernels import moe_reference as ref
from kernels.act_quant import quantize_activation
from kernels.availability import interpret_mode
from kernels.moe_down_dp4a import launch_down, takes
from kernels.moe_routing import ExpertRouting
from tests.kernels.conftest import relative_error
from tests.kernels.test_moe_gemv import N_EXPERT, TOLERANCE, _experts, _routing, _x, _x8

N_OUT = 70  # not whole tiles of rows

# (format, n_in, top_k): Qwen3-30B-A3B's down rows (768, top-8: 24 super-blocks padded to 32),
# k not a power of two (6 x 2 = 12 super-blocks, padded to 16), one super-block a row
_CASES = [("Q6_K", 768, 8), ("Q4_K", 768, 8), ("Q4_K", 512, 6), ("Q6_K", 256, 3)]


@pytest.mark.parametrize(("fmt", "n_in", "top_k"), _CASES)
@pytest.mark.parametrize(("block_n", "num_warps"), [(4, 4), (1, 2)])
def test_down_over_the_experts_rows(fmt, n_in, top_k, block_n, num_warps, device):
    w, dense, _ = _experts(fmt, N_OUT, n_in, 31, device)
    _, ids, weights = _routing(1, top_k, seed=32 + top_k, device=device)
    routing = ExpertRouting.one_token(
        torch.from_numpy(ids).to(device), torch.from_numpy(weights).to(device), N_EXPERT
    )
    h = _x(top_k, n_in, seed=33) * torch.linspace(0.05, 2, n_in)
    hq = quantize_activation(h.reshape(1, -1).to(device))
    out = launch_down(hq, w, routing, torch.float32, block_n, num_warps,
                      not interpret_mode(), False)  # fmt: skip
    expected = ref.down(_x8(h).reshape(1, top_k, -1), dense, ids, weights)
    assert out.shape == (1, N_OUT)
    assert relative_error(out.cpu(), expected) < TOLERANCE


@pytest.mark.parametrize(
    ("fmt", "n_in", "taken"),
    [("Q4_K", 768, True), ("Q6_K", 512, True), ("Q5_K", 768, False), ("Q8_0", 768, False),
     ("Q4_K", 2880, False), ("MXFP4", 2880, False)],
)  # fmt: skip
def test_which_downs_it_takes(fmt, n_in, taken):
    assert takes(fmt, n_in) is taken


@pytest.mark.parametrize(
    ("down_fmt", "tokens", "early"),
    [("Q4_K", 1, True), ("Q5_K", 1, False), (None, 1, False), ("Q4_K", 2, False)],
)
def test_the_gate_up_lets_this_down_in_as_it_starts(down_fmt, tokens, early, device, monkeypatch):
    """expert_gate_up(then=down): where that down is this module's (takes_dense_down), the
    gate/up's default shape lets the next launch in at its programs' start (early_next); before
    moe_one_token.py's down, or without `then`, once its dot products are done."""
    from kernels import moe_gemv

    seen = []
    launch = moe_gemv._launch

    def recording(*args):
        seen.append(args[7])  # the config
        return launch(*args)

    monkeypatch.setattr(moe_gemv, "_launch", recording)
    # (only the launch's shape is looked at: the down's rows need not be the gate/up's)
    gate, _, _ = _experts("Q4_K", 16, 256, 41, device)
    up, _, _ = _experts("Q4_K", 16, 256, 42, device)
    down = _experts(down_fmt, 16, 256, 43, device)[0] if down_fmt else None
    routing, _, _ = _routing(tokens, 2, seed=44, device=device)
    x = _x(tokens, 256, seed=45, scale=0.1).to(device)
    moe_gemv.expert_gate_up(x, gate, up, routing, then=down)
    assert len(seen) == 1 and (seen[0] is not None and seen[0].early_next) == early
