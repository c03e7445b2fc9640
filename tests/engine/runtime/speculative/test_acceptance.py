"""The speculative sampling rule keeps the model's distribution: chi-square tests on a small
vocabulary, with fixed seeds (so the tests are repeatable), and tests that it can fail."""

import numpy as np
import pytest

from engine.runtime.speculative.acceptance import accept_or_replace, one_hot, verify_drafts

P = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
Q = np.array([0.1, 0.5, 0.05, 0.05, 0.2, 0.1])  # a poor draft, far from P
N = 40_000


def _first_tokens(draw_one, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(P))
    for _ in range(N):
        counts[draw_one(rng)] += 1
    return counts


# The chi-square distribution's 0.999 quantile for 5 degrees of freedom (six tokens): a sample
# of the right law exceeds it one time in a thousand.
CHI2_999_DF5 = 20.515


def _fits(counts, p) -> bool:
    expected = p * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum()) < CHI2_999_DF5


def test_the_rule_gives_the_model_distribution_for_a_sampled_draft():
    def draw(rng):
        x = rng.choice(len(Q), p=Q)
        return accept_or_replace(P, Q, x, rng)[1]

    assert _fits(_first_tokens(draw), P)


def test_the_rule_gives_the_model_distribution_for_a_greedy_draft():
    """Hearth's drafters propose their top token: q is one-hot."""
    x = int(np.argmax(Q))
    assert _fits(_first_tokens(lambda rng: accept_or_replace(P, one_hot(len(P), x), x, rng)[1]), P)


def test_draw_and_compare_is_the_same_law_as_the_one_hot_rule():
    """The decode loop draws y from p with llama.cpp's chain and keeps the draft x if y == x,
    else emits y: kept with probability p(x), and on a miss y ~ p(y) / (1 - p(x)) for y != x.
    The rule with a one-hot q must give exactly that."""
    x = 1
    rng = np.random.default_rng(1)
    kept, replaced = 0, np.zeros(len(P))
    for _ in range(N):
        was_kept, token = accept_or_replace(P, one_hot(len(P), x), x, rng)
        if was_kept:
            kept += 1
        else:
            replaced[token] += 1
    assert kept / N == pytest.approx(P[x], abs=0.01)
    assert replaced[x] == 0
    others = np.delete(replaced, x)
    expected = np.delete(P, x) / (1 - P[x])
    observed = others.sum() * expected
    # four degrees of freedom: the 0.999 quantile is 18.467
    assert float(((others - observed) ** 2 / observed).sum()) < 18.467


def test_keeping_the_draft_always_would_fail_the_test():
    """The test has power: emitting the draft unchecked gives q, which the test rejects."""
    assert not _fits(_first_tokens(lambda rng: rng.choice(len(Q), p=Q)), P)


def test_a_whole_step_second_position_follows_the_model_given_the_first():
    """Two drafts; conditioned on the first emitted token being the kept draft, the second
    emitted token follows the model's distribution at that position."""
    p2 = np.array([0.05, 0.05, 0.5, 0.2, 0.1, 0.1])
    q2 = np.array([0.3, 0.2, 0.1, 0.1, 0.2, 0.1])
    rng = np.random.default_rng(3)
    counts = np.zeros(6)
    for _ in range(N):
        x1, x2 = rng.choice(6, p=Q), rng.choice(6, p=q2)
        out = verify_drafts([P, p2, P], [Q, q2], [x1, x2], rng)
        if out[0] == x1 and len(out) >= 2:
            counts[out[1]] += 1
    # Given x1 kept, the second token is drawn by the rule from p2 whatever x1 was.
    assert _fits(counts, p2)


def test_verify_drafts_wants_one_model_row_more_than_drafts():
    with pytest.raises(ValueError):
        verify_drafts([P], [Q], [0], np.random.default_rng(0))
