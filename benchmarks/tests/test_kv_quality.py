"""The KV quality tool's arithmetic: KL, top-1 agreement, perplexity, and the cache codec."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch", reason="the KV quality tool runs the Hearth engine (torch)")

from benchmarks.kv_quality import Score, log_softmax, roundtrip_codec


def test_a_format_equal_to_the_baseline_scores_zero_kl_and_the_same_perplexity():
    logits = np.random.default_rng(0).normal(size=(5, 11))
    base = log_softmax(logits)
    targets = np.array([1, 2, 3, 4, 5])
    score = Score()
    score.add(base, base, targets)
    kl, p99, top1, ppl = score.row()
    assert kl == pytest.approx(0, abs=1e-12) and p99 == pytest.approx(0, abs=1e-12)
    assert top1 == 1.0
    assert ppl == pytest.approx(math.exp(-base[np.arange(5), targets].mean()))


def test_kl_is_the_textbook_one():
    base = np.log(np.array([[0.5, 0.5]]))
    other = np.log(np.array([[0.9, 0.1]]))
    score = Score()
    score.add(other, base, np.array([0]))
    assert score.row()[0] == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1))
    assert score.row()[2] == 1.0  # ties in the baseline: argmax 0 both


def test_the_codec_rounds_rows_as_the_format_stores_them():
    import torch

    rows = torch.randn(3, 2, 64)
    q8 = roundtrip_codec("q8")(rows)
    rot4 = roundtrip_codec("rot4")(rows)
    assert q8.shape == rot4.shape == rows.shape
    err8 = (q8 - rows).abs().max().item()
    err4 = (rot4 - rows).abs().max().item()
    assert 0 < err8 < err4 < 1.0  # lossy, 4 bits more than 8
