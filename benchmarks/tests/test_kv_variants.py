"""The 4-bit K layouts measured by the quality tool: what each keeps."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="the residual cache is a TorchKVCache (torch)")

from benchmarks.kv_variants import VARIANTS, kivi4, rot4_groups


def _keys_with_an_outlier_channel(seed=0):
    x = np.random.default_rng(seed).standard_normal((128, 2, 64)).astype(np.float32)
    x[:, :, 7] = 40.0 + x[:, :, 7]  # a channel far from the others, as real keys have
    return x


def test_per_channel_keys_give_an_outlier_channel_its_own_range():
    """Per token, one channel 40 away stretches every group's range; per channel it does not,
    so the other channels keep their 4-bit precision."""
    x = _keys_with_an_outlier_channel()
    others = np.arange(64) != 7
    per_channel = np.abs(kivi4(x) - x)[..., others].mean()
    per_token = np.abs(rot4_groups(x, 32) - x)[..., others].mean()
    assert per_channel < per_token / 2


def test_every_variant_keeps_the_shape_and_loses_a_little():
    x = _keys_with_an_outlier_channel(1)
    for name, roundtrip in VARIANTS.items():
        y = roundtrip(x)
        assert y.shape == x.shape, name
        assert 0 < np.abs(y - x).max() < 0.2 * np.abs(x).max(), name


def test_smaller_groups_lose_less():
    x = np.random.default_rng(2).standard_normal((64, 1, 64)).astype(np.float32)
    assert np.abs(rot4_groups(x, 16) - x).mean() < np.abs(rot4_groups(x, 32) - x).mean()
