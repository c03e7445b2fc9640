"""testkit/residual_cache.py: KIVI's residual, the reference the kivi4 paged cache is held to."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the residual cache is a TorchKVCache (torch)")

from testkit.residual_cache import residual_cache  # noqa: E402


def test_the_residual_cache_sees_its_own_group_exactly_and_the_rest_through_the_codec():
    from engine.hearth.kv_cache import TorchKVCache

    args = dict(n_layer=1, n_head_kv=2, head_dim=16, n_ctx=40, dtype=torch.float32)
    k, v = torch.randn(40, 2, 16), torch.randn(40, 2, 16)
    q, positions = torch.randn(3, 4, 16), torch.tensor([33, 34, 35])
    keep = torch.arange(40)[:, None, None] >= 32
    # the codec zeroes what it stores: groups 0..3 (positions 0..31) then attend as zeros;
    # values of the own group exact only with exact_values (kernels' kivi4 keeps both)
    for exact_values, v_seen in ((True, v * keep), (False, v * 0)):
        zeroed = residual_cache(8, exact_values, **args, k_codec=lambda r: r * 0,
                                v_codec=lambda r: r * 0)  # fmt: skip
        expected_cache = TorchKVCache(**args)
        zeroed.write(0, torch.arange(40), k, v)
        expected_cache.write(0, torch.arange(40), k * keep, v_seen)
        got = zeroed.attend(0, q, positions, 36, scale=0.25)
        expected = expected_cache.attend(0, q, positions, 36, scale=0.25)
        torch.testing.assert_close(got, expected)
