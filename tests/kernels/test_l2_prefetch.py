"""The L2 prefetch's cut of a span into one share a program (kernels/l2_prefetch.py): every
byte of the span in exactly one share, each share 16-byte aligned, as
cp.async.bulk.prefetch asks. The instruction itself runs only on a GPU (its compile check is
tests/kernels/test_moe_compiles.py; the launch with it, tests/kernels/test_moe_gemv_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.l2_prefetch import ALIGN, share_bounds, share_bytes

CASES = [(0, 1), (16, 1), (16, 7), (4096, 192), (786_432, 192), (12_288, 192), (98_304, 5)]
RNG = np.random.default_rng(7)
CASES += [(int(RNG.integers(1, 1 << 16)) * ALIGN, int(RNG.integers(1, 2000))) for _ in range(40)]


@pytest.mark.parametrize(("nbytes", "n_shares"), CASES)
def test_shares_cover_the_span_once_and_aligned(nbytes, n_shares):
    chunk = share_bytes(nbytes, n_shares)
    covered = np.zeros(nbytes, dtype=np.int32)
    for share in range(n_shares):
        start, size = share_bounds(nbytes, chunk, share)
        assert start % ALIGN == 0 and size % ALIGN == 0
        covered[start : start + size] += 1
    assert (covered == 1).all()


def test_a_span_not_a_multiple_of_16_is_refused():
    with pytest.raises(ValueError, match="multiples of 16"):
        share_bytes(100, 3)
