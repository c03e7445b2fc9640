"""A batch decoded together equals each sequence decoded alone (issue 38): four sequences of
different lengths, their pages interleaved in one pool, prefilled in one forward pass (rows of
each prompt together) and then decoded one token each per step, against the one-sequence path
(TorchKVCache) on tiny random models, float32 caches on both sides as in test_forward.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth.batch_cache import BatchRows, TorchBatchCache
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import TorchOps
from engine.hearth.page_pool import PagesExhausted
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.batch_steps import decode_together, forward_rows
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

PROMPTS = [[5, 17, 300], [42, 0, 99, 256, 7, 7, 123], [64, 11], [9, 8, 7, 6, 5, 4, 3, 2, 1, 300]]
STEPS = [[12, 13, 14, 15], [1, 2, 3, 4], [200, 201, 202, 203], [77, 78, 79, 80]]
N_CTX = 32
PAGE = 4  # small pages: the sequences' pages interleave in the pool

CASES = {
    "llama": tiny_spec("llama"),
    "gemma3-sliding-window": tiny_spec("gemma3"),
    "gpt-oss-sinks-moe": tiny_spec("gpt-oss"),
}


@pytest.fixture(scope="module", params=list(CASES))
def model(request, tmp_path_factory):
    path = write_tiny_gguf(tmp_path_factory.mktemp("batch") / "m.gguf", CASES[request.param])
    info = read_model_info(path)
    return Transformer.load(model_config(info), GGUFTensors(str(path), info), TorchOps("cpu"))


def _alone(model: Transformer, prompt: list[int], steps: list[int]) -> np.ndarray:
    """The one-sequence path: prefill, then a decode step per token (the logits of each)."""
    cfg = model.config
    cache = TorchKVCache(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim,
                         n_ctx=N_CTX, dtype=torch.float32)  # fmt: skip
    n = len(prompt)
    rows = [model.forward(torch.tensor(prompt), torch.arange(n), cache, n_keys=n)]
    for i, token in enumerate(steps):
        rows.append(model.forward(torch.tensor([token]), torch.tensor([n + i]), cache,
                                  n_keys=N_CTX))  # fmt: skip
    return torch.stack(rows).numpy()


def _new_cache(model: Transformer, n_pages: int) -> TorchBatchCache:
    cfg = model.config
    return TorchBatchCache(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim,
                           n_pages=n_pages, page_size=PAGE, dtype=torch.float32)  # fmt: skip


def test_batched_decode_equals_each_sequence_alone(model):
    cache = _new_cache(model, n_pages=40)
    seqs, got = decode_together(model, cache, PROMPTS, STEPS)
    assert len({len(cache.pool.pages(s)) for s in seqs}) > 1  # lengths differ
    for i, (prompt, steps) in enumerate(zip(PROMPTS, STEPS, strict=True)):
        expected = _alone(model, prompt, steps)
        assert expected.std() > 0.1  # the logits say something
        np.testing.assert_allclose(got[i], expected, atol=2e-4 * max(1.0, np.abs(expected).max()))


def test_a_sequence_joins_and_one_leaves_between_steps(model):
    """Sequence 0 decodes; sequence 1's prompt is prefilled in the same step (a mixed step);
    sequence 0 then ends and its pages go back at once; 1 decodes on, as if alone."""
    cache = _new_cache(model, n_pages=8)
    a = cache.new_sequence()
    cache.grow(a, len(PROMPTS[0]))
    forward_rows(model, cache, [a] * 3, PROMPTS[0], [0, 1, 2], [2])
    b = cache.new_sequence()
    pos_a = cache.grow(a, 1)
    start = cache.grow(b, len(PROMPTS[1]))
    mixed = forward_rows(model, cache, [a] + [b] * 7, [STEPS[0][0], *PROMPTS[1]],
                     [pos_a, *range(start, start + 7)], [0, 7])  # fmt: skip
    held = cache.pool.free_pages
    cache.free_sequence(a)
    assert cache.pool.free_pages == held + 1  # a's one page (4 positions) back at once
    got = [mixed[1]]
    for token in STEPS[1]:
        pos = cache.grow(b, 1)
        got.append(forward_rows(model, cache, [b], [token], [pos], [0])[0])
    expected = _alone(model, PROMPTS[1], STEPS[1])
    np.testing.assert_allclose(mixed[0], _alone(model, PROMPTS[0], STEPS[0][:1])[1],
                               atol=2e-4 * max(1.0, np.abs(expected).max()))  # fmt: skip
    np.testing.assert_allclose(
        torch.stack(got).numpy(), expected, atol=2e-4 * max(1.0, np.abs(expected).max())
    )


def test_running_out_of_pages_leaves_the_others_intact(model):
    cache = _new_cache(model, n_pages=3)
    a, b = cache.new_sequence(), cache.new_sequence()
    cache.grow(a, 8)  # two pages
    cache.grow(b, 4)  # the last page
    forward_rows(model, cache, [a] * 8 + [b] * 4, [1] * 8 + [2] * 4, [*range(8), *range(4)], [0])
    k_before = cache.k.clone()
    with pytest.raises(PagesExhausted, match="KV cache is full"):
        cache.grow(b, 1)
    assert torch.equal(cache.k, k_before) and cache.length(b) == 4


def test_rows_of_a_sequence_must_be_together(model):
    cache = _new_cache(model, n_pages=4)
    a, b = cache.new_sequence(), cache.new_sequence()
    cache.grow(a, 2)
    cache.grow(b, 1)
    with pytest.raises(ValueError, match="contiguous"):
        BatchRows(cache, [a, b, a], [0, 0, 1])
    with pytest.raises(ValueError, match="before it was grown"):
        BatchRows(cache, [b], [1])


# Shared prefixes (page_pool.py): a prompt of 10 tokens is two full pages of 4 and two tokens.
SHARED = [5, 17, 300, 42, 0, 99, 256, 7, 7, 123]


def _prefill(model, cache, seq, tokens):
    """tokens computed from seq's current length on; the logits of the last."""
    start = cache.grow(seq, len(tokens))
    return forward_rows(model, cache, [seq] * len(tokens), tokens,
                    list(range(start, start + len(tokens))), [len(tokens) - 1])[0]  # fmt: skip


def test_a_shared_prefix_is_computed_once_and_gives_each_its_own_logits(model):
    """b's prompt starts with a's: b takes a's two full pages by reference and computes only
    its last 3 tokens; both then decode as if alone."""
    cache = _new_cache(model, n_pages=12)
    prompt_b = [*SHARED[:8], 64, 11, 3]
    a = cache.new_sequence(SHARED)
    assert cache.length(a) == 0  # nothing indexed yet
    got_a = [_prefill(model, cache, a, SHARED)]
    cache.publish(a, SHARED)
    b = cache.new_sequence(prompt_b, limit=len(prompt_b) - 1)
    assert cache.length(b) == 8  # two pages shared: 3 of b's 11 prompt tokens computed
    assert cache.pool.pages(b)[:2] == cache.pool.pages(a)[:2]
    got_b = [_prefill(model, cache, b, prompt_b[8:])]
    for step in range(3):
        pos = [cache.grow(s, 1) for s in (a, b)]
        out = forward_rows(model, cache, [a, b], [STEPS[0][step], STEPS[1][step]], pos, [0, 1])
        got_a.append(out[0])
        got_b.append(out[1])
    for got, prompt, steps in ((got_a, SHARED, STEPS[0][:3]), (got_b, prompt_b, STEPS[1][:3])):
        expected = _alone(model, prompt, steps)
        np.testing.assert_allclose(
            torch.stack(got).numpy(), expected, atol=2e-4 * max(1.0, np.abs(expected).max())
        )


def test_diverging_inside_a_shared_page_copies_it_and_leaves_the_other_unchanged(model):
    """c matches 6 of a's tokens: it shares a's second page, which is copied on c's first
    write; a's pages hold what they held, and a decodes on as if alone; closing c frees only
    its own pages."""
    cache = _new_cache(model, n_pages=12)
    a = cache.new_sequence()
    got_a = [_prefill(model, cache, a, SHARED)]
    cache.publish(a, SHARED)
    k_before = cache.k.clone()
    prompt_c = [*SHARED[:6], 1, 2, 3]
    c = cache.new_sequence(prompt_c, limit=len(prompt_c) - 1)
    assert cache.length(c) == 6 and cache.pool.pages(c) == cache.pool.pages(a)[:2]
    got_c = _prefill(model, cache, c, prompt_c[6:])
    assert cache.pool.pages(c)[0] == cache.pool.pages(a)[0]  # the full first page still shared
    assert cache.pool.pages(c)[1] != cache.pool.pages(a)[1]  # the second copied, then written
    held = cache.pool.pages(a)
    slots = cache.slots(a, cache.length(a))
    assert torch.equal(cache.k[:, :, slots], k_before[:, :, slots])
    expected_c = _alone(model, prompt_c, [])
    np.testing.assert_allclose(got_c.numpy(), expected_c[0],
                               atol=2e-4 * max(1.0, np.abs(expected_c).max()))  # fmt: skip
    free = cache.pool.free_pages
    cache.free_sequence(c)  # c's own pages (the copy and its third) go back; a's stay
    assert cache.pool.free_pages == free + 2 and cache.pool.pages(a) == held
    for token in STEPS[0][:2]:
        pos = cache.grow(a, 1)
        got_a.append(forward_rows(model, cache, [a], [token], [pos], [0])[0])
    expected = _alone(model, SHARED, STEPS[0][:2])
    np.testing.assert_allclose(
        torch.stack(got_a).numpy(), expected, atol=2e-4 * max(1.0, np.abs(expected).max())
    )
