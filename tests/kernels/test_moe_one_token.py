"""The one-token expert down (kernels/moe_one_token.py): a decode step's k experts in one
program, summed there, against kernels/moe_reference.py (float64) and against moe_gemv.py's
grouped kernel (the same bits), k a power of two and not, rows not whole tiles, biases,
every format, h in float and in 8 bits (`dense=False`: Q4_K and Q6_K otherwise take
moe_down_dp4a.py's down); and which down expert_down takes."""

from __future__ import annotations

import pytest
import torch

from kernels import moe_reference as ref
from kernels.act_quant import quantize_activation
from kernels.availability import interpret_mode
from kernels.moe_gemv import MoeGemvConfig, expert_down, one_token_config
from tests.kernels.conftest import relative_error
from tests.kernels.test_moe_gemv import TOLERANCE, _experts, _routing, _x, _x8

N_OUT = 70  # not whole tiles of rows
ONE_TOKEN = one_token_config()  # the engine's launch shape
# moe_gemv's kernel at one token (wide tiles in the interpreter, which pays per program)
GROUPED = MoeGemvConfig(block_n=16 if interpret_mode() else 4, num_warps=4)


# (format, n_in, top_k): Qwen3-30B-A3B's down rows (768, top-8), k not a power of two (6:
# slots 6 and 7 of the tile masked), blocks of 32 (Q8_0, Q4_1, Q5_0), MXFP4
_DOWN = [("Q6_K", 768, 8), ("Q4_K", 512, 6), ("Q5_K", 256, 2), ("Q8_0", 352, 4)]
_DOWN += [("Q4_1", 352, 3), ("Q5_0", 352, 2), ("MXFP4", 352, 4)]


@pytest.mark.parametrize(("fmt", "n_in", "top_k"), _DOWN)
@pytest.mark.parametrize("bias", [False, True])
def test_down_gives_the_grouped_kernels_bits(fmt, n_in, top_k, bias, device):
    """h in float, rounded in the program: the bits of moe_gemv's grouped down (partials and
    the last program's finish), and the reference's value."""
    w, dense, b = _experts(fmt, N_OUT, n_in, 21, device, bias=bias)
    routing, ids, weights = _routing(1, top_k, seed=22 + top_k, device=device)
    h = (_x(top_k, n_in, seed=23) * torch.linspace(0.05, 2, n_in)).reshape(1, top_k, n_in)
    one = expert_down(h.to(device), w, routing, config=ONE_TOKEN, dense=False)
    grouped = expert_down(h.to(device), w, routing, config=GROUPED, one_token=False)
    assert one.shape == (1, N_OUT) and torch.equal(one, grouped)
    expected = ref.down(_x8(h.reshape(top_k, n_in)).reshape(1, top_k, -1), dense, ids, weights, b)
    assert relative_error(one.cpu(), expected) < TOLERANCE


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_down_from_h_in_8_bits_gives_the_same_bits(dtype, device):
    """h quantized by its own launch and read in 8 bits: the bits of h rounded in the program."""
    w, _, _ = _experts("Q6_K", N_OUT, 768, 24, device)
    routing, _, _ = _routing(1, 8, seed=25, device=device)
    h = (_x(8, 768, seed=26) * 2).to(dtype).reshape(1, 8, 768).to(device)
    fused = expert_down(h, w, routing, config=ONE_TOKEN, dense=False)
    hq = quantize_activation(h.reshape(8, 768))
    apart = expert_down(h, w, routing, quantized=hq, config=ONE_TOKEN, dense=False)
    assert fused.dtype == dtype and torch.equal(fused, apart) and fused.abs().max() > 0


@pytest.mark.parametrize(
    ("fmt", "tokens", "one_token", "in_host_memory", "taken"),
    [("Q6_K", 1, True, False, "dense"), ("Q4_K", 1, True, False, "dense"),
     ("Q5_K", 1, True, False, "slots"), ("Q6_K", 2, True, False, "grouped"),
     ("Q6_K", 1, False, False, "grouped"), ("Q6_K", 1, True, True, "grouped")],
)  # fmt: skip
def test_which_kernel_a_down_takes_by_default(
    fmt, tokens, one_token, in_host_memory, taken, device, monkeypatch
):
    """One token in device memory: moe_down_dp4a.py's down for the integer GEMV's formats,
    else the one-token down; more tokens, one_token=False, or experts read over the bus
    (in_host_memory): the grouped kernel."""
    import dataclasses

    from kernels import moe_down_dp4a, moe_one_token

    calls = []
    for name, module in (("dense", moe_down_dp4a), ("slots", moe_one_token)):
        launch = module.launch_down

        def recording(*a, _launch=launch, _name=name, **k):
            calls.append(_name)
            return _launch(*a, **k)

        monkeypatch.setattr(module, "launch_down", recording)
    w, dense, _ = _experts(fmt, N_OUT, 256, 27, device)
    w = dataclasses.replace(w, in_host_memory=in_host_memory)
    routing, ids, weights = _routing(tokens, 4, seed=28, device=device)
    h = _x(tokens * 4, 256, seed=29).reshape(tokens, 4, 256)
    out = expert_down(h.to(device), w, routing, one_token=one_token)
    assert calls == ([] if taken == "grouped" else [taken])
    expected = ref.down(_x8(h.reshape(-1, 256)).reshape(tokens, 4, -1), dense, ids, weights)
    assert relative_error(out.cpu(), expected) < TOLERANCE


@pytest.mark.parametrize(
    ("tokens", "top_k", "n_in", "taken"),
    [(1, 8, 768, True), (1, 16, 768, False), (1, 4, 2880, False), (3, 2, 768, False)],
)
def test_which_downs_it_takes(tokens, top_k, n_in, taken):
    """One token, at most 8 picks (its measured shape), a row in one split (gpt-oss's 2880
    inputs take three)."""
    from kernels.moe_gemv import takes_one_token

    assert takes_one_token(tokens, top_k, n_in) == taken
