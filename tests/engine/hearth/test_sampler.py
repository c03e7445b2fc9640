"""The torch sampler against llama.cpp's own sampler chain (through its C API) on the same
logits: the same tokens survive each setting, with the same logits; and the draw."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
import torch

from engine.hearth.sampler import TorchSampler
from engine.runtime.protocol import SamplingParams

C = pytest.importorskip("llama_cpp.llama_cpp")

VOCAB = 1000
HISTORY = [3, 17, 17, 500, 999, 3]

SETTINGS = {
    "defaults": SamplingParams(),
    "top-k only": SamplingParams(top_k=7, top_p=1.0, min_p=0.0, temperature=1.0),
    "top-p only": SamplingParams(top_k=0, top_p=0.5, min_p=0.0, temperature=0.8),
    "min-p only": SamplingParams(top_k=0, top_p=1.0, min_p=0.2, temperature=1.3),
    "penalties": SamplingParams(repeat_penalty=1.3, repeat_last_n=4, top_k=50),
    "nothing filters": SamplingParams(top_k=0, top_p=1.0, min_p=0.0, temperature=0.5),
}


def llama_cpp_survivors(logits: np.ndarray, sp: SamplingParams, history: list[int]):
    """Apply llama.cpp's chain, without the final draw; return {token: logit} left."""
    chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
    add = lambda s: C.llama_sampler_chain_add(chain, s)  # noqa: E731
    add(C.llama_sampler_init_penalties(VOCAB, sp.repeat_last_n, sp.repeat_penalty, 0.0, 0.0))
    add(C.llama_sampler_init_top_k(sp.top_k))
    add(C.llama_sampler_init_top_p(sp.top_p, 1))
    add(C.llama_sampler_init_min_p(sp.min_p, 1))
    add(C.llama_sampler_init_temp(sp.temperature))
    for token in history:
        C.llama_sampler_accept(chain, token)
    data = (C.llama_token_data * VOCAB)(
        *[C.llama_token_data(i, float(v), 0.0) for i, v in enumerate(logits)]
    )
    array = C.llama_token_data_array(data, VOCAB, -1, False)
    C.llama_sampler_apply(chain, ctypes.byref(array))
    C.llama_sampler_free(chain)
    return {data[i].id: data[i].logit for i in range(array.size) if data[i].logit > -math.inf}


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_same_survivors_as_llama_cpp(name, seed):
    sp = SETTINGS[name]
    logits = np.random.default_rng(seed).normal(0, 3, VOCAB).astype(np.float32)
    expected = llama_cpp_survivors(logits, sp, HISTORY)
    sampler = TorchSampler(sp)
    for token in HISTORY:
        sampler.accept(token)
    got = sampler.filtered_logits(torch.from_numpy(logits)).numpy()
    kept = {int(i): float(got[i]) for i in np.flatnonzero(got > -np.inf)}
    assert set(kept) == set(expected)
    assert 1 <= len(kept) < VOCAB or name == "nothing filters"
    for token, value in expected.items():
        assert kept[token] == pytest.approx(value, rel=1e-5, abs=1e-5)


def test_greedy_is_the_first_best_token():
    logits = torch.tensor([0.5, 2.0, 2.0, -1.0])
    sampler = TorchSampler(SamplingParams(temperature=0.0))
    assert sampler.sample(logits) == 1


def test_greedy_with_a_repeat_penalty_avoids_the_repeated_token():
    sampler = TorchSampler(SamplingParams(temperature=0.0, repeat_penalty=2.0, repeat_last_n=8))
    logits = torch.tensor([1.0, 1.5, 0.2])
    assert sampler.sample(logits) == 1
    assert sampler.sample(logits) == 0  # 1.5 / 2 < 1.0


def test_a_seed_makes_replies_reproducible_and_reset_starts_over():
    logits = torch.zeros(50)
    sp = SamplingParams(seed=1234, top_k=0, top_p=1.0, min_p=0.0, temperature=1.0)
    first = TorchSampler(sp)
    draws = [first.sample(logits) for _ in range(20)]
    assert len(set(draws)) > 5  # a uniform draw, not a constant
    first.reset()
    assert [first.sample(logits) for _ in range(20)] == draws
    assert [TorchSampler(sp).sample(logits) for _ in range(1)] == draws[:1]


def test_the_default_seed_is_random_per_reply():
    logits = torch.zeros(10_000)
    sampler = TorchSampler(SamplingParams(top_k=0, top_p=1.0, min_p=0.0, temperature=1.0))
    first = [sampler.sample(logits) for _ in range(8)]
    sampler.reset()
    assert [sampler.sample(logits) for _ in range(8)] != first


def test_draws_follow_the_filtered_distribution():
    logits = torch.log(torch.tensor([0.6, 0.3, 0.1]))
    sampler = TorchSampler(SamplingParams(seed=7, top_k=2, top_p=1.0, min_p=0.0, temperature=1.0))
    counts = np.bincount([sampler.sample(logits) for _ in range(3000)], minlength=3)
    assert counts[2] == 0  # cut by top-k
    assert counts[0] / counts[:2].sum() == pytest.approx(2 / 3, abs=0.03)


def test_a_batch_of_rows_draws_what_each_row_draws_alone():
    """sample_rows over rows of different settings (greedy, top-k, top-p, min-p, nothing)
    gives each row the token its own TorchSampler draws with the same seed and draw number:
    a reply is the same in a batch and alone."""
    from engine.hearth.sampler import sample_rows

    rng = np.random.default_rng(3)
    settings = [
        SamplingParams(temperature=0.0),
        SamplingParams(seed=11, top_k=7, top_p=1.0, min_p=0.0, temperature=1.0),
        SamplingParams(seed=12, top_k=0, top_p=0.5, min_p=0.0, temperature=0.8),
        SamplingParams(seed=13, top_k=0, top_p=1.0, min_p=0.2, temperature=1.3),
        SamplingParams(seed=14, top_k=0, top_p=1.0, min_p=0.0, temperature=0.5),
    ]
    for _ in range(20):
        logits = torch.from_numpy(rng.normal(0, 3, (len(settings), VOCAB)).astype(np.float32))
        alone = [TorchSampler(sp) for sp in settings]
        together = [TorchSampler(sp) for sp in settings]
        rows = [s.next_draw() for s in together]
        got = sample_rows(logits, rows).tolist()
        assert got == [s.sample(row) for s, row in zip(alone, logits, strict=True)]


def test_every_draw_is_a_surviving_token_and_the_draws_follow_softmax():
    """Over 4,000 seeds, one draw each: only tokens the chain keeps, at frequencies within a
    few percent of softmax(logits / temperature) over them."""
    from engine.hearth.sampler import RowDraw, sample_rows

    logits = torch.tensor([2.0, 1.5, 1.0, 0.0, -5.0, 3.0])
    rows = [RowDraw(temperature=0.7, top_k=4, top_p=1.0, min_p=0.0, seed=s) for s in range(4000)]
    tokens = sample_rows(logits.expand(len(rows), -1), rows)
    counts = torch.bincount(tokens, minlength=6).double() / len(rows)
    assert counts[3] == 0 and counts[4] == 0  # cut by top-k 4
    expected = torch.zeros(6, dtype=torch.float64)
    kept = torch.tensor([0, 1, 2, 5])
    expected[kept] = torch.softmax(logits[kept].double() / 0.7, dim=0)
    assert torch.allclose(counts, expected, atol=0.025), (counts, expected)


def test_the_draw_number_and_the_seed_each_change_the_draw():
    from engine.hearth.sampler import RowDraw, sample_rows

    logits = torch.zeros(1000).expand(64, -1)
    by_draw = sample_rows(logits, [RowDraw(1.0, 0, 1.0, 0.0, seed=5, draw=d) for d in range(64)])
    by_seed = sample_rows(logits, [RowDraw(1.0, 0, 1.0, 0.0, seed=s, draw=0) for s in range(64)])
    again = sample_rows(logits, [RowDraw(1.0, 0, 1.0, 0.0, seed=5, draw=d) for d in range(64)])
    assert len(set(by_draw.tolist())) > 50 and len(set(by_seed.tolist())) > 50
    assert torch.equal(by_draw, again)
