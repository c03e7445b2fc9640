"""benchmarks/kernels/attention_anatomy.py: the parts that run without a GPU."""

from __future__ import annotations

import pytest

from benchmarks.kernels import attention_anatomy
from kernels import decode_launch


def test_a_left_out_kernel_launches_nothing_and_comes_back_after():
    kept = decode_launch.decode_reduce_kernel
    with attention_anatomy._without("decode_reduce_kernel"):
        assert decode_launch.decode_reduce_kernel is not kept
        assert decode_launch.decode_reduce_kernel[(4, 32)](1, 2, CHUNK=64) is None
    assert decode_launch.decode_reduce_kernel is kept


def test_the_kernel_comes_back_when_the_measurement_fails():
    kept = decode_launch.decode_split_kernel
    with pytest.raises(RuntimeError), attention_anatomy._without("decode_split_kernel"):
        raise RuntimeError("a launch failed")
    assert decode_launch.decode_split_kernel is kept
