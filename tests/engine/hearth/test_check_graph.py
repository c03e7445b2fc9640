"""check_graph.bucket: the check sizes the Hearth engine captures (the captured checks' bits are
tests/engine/hearth/test_verify.py's, on a GPU)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")

from engine.hearth.check_graph import bucket
from engine.runtime.speculative.draft_length import fixed_shape_lengths


def test_a_check_takes_the_next_power_of_two_up():
    assert [bucket(n) for n in range(1, 18)] == [2, 2, 4, 4] + [8] * 4 + [16] * 8 + [32]


def test_the_decode_loop_s_gpu_draft_lengths_are_checked_unpadded():
    """The loop drafts 1, 3, 7, 15 tokens on a GPU: with the last token, each check is a size
    the engine captures, so only a draft shortened near the reply's end is padded."""
    for drafts in fixed_shape_lengths(16):
        assert bucket(drafts + 1) == drafts + 1
