"""kernels/occupancy.py: programs an SM holds, from a compiled kernel's resources."""

from __future__ import annotations

import pytest

from kernels.occupancy import SmLimits, programs_per_sm

H100 = SmLimits()


@pytest.mark.parametrize(
    ("regs", "warps", "shared", "expected"),
    [
        (128, 4, 43016, 4),  # rot4/rot4, 5 stages (sm_90 SASS): registers bound it
        (168, 4, 45064, 3),  # kivi4/rot4: the split count once assumed 4
        (168, 2, 40968, 5),  # rot4/rot4 with 2 warps
        (96, 4, 71688, 3),  # f16/f16, 5 stages: shared memory bounds it
        (32, 1, 0, 32),  # the hardware's cap on programs an SM
        (16, 32, 0, 2),  # the cap on warps an SM (64)
    ],
)
def test_programs_per_sm_takes_the_tightest_limit(regs, warps, shared, expected):
    assert programs_per_sm(regs, warps, shared, H100) == expected


def test_registers_are_given_a_warp_in_granules_of_256():
    # 129 registers a thread is 4,128 a warp, rounded up to 4,352: 3 warps fit a sub-partition's
    # 16,384 registers (12 an SM), not 15 of the whole file's 65,536
    assert programs_per_sm(129, 1, 0, H100) == 12
    assert programs_per_sm(128, 1, 0, H100) == 16


@pytest.mark.parametrize(
    ("regs", "warps", "expected"),
    [
        (200, 2, 4),  # 6,400 a warp: 2 a sub-partition, 8 an SM; over the whole file, 5 programs
        (216, 2, 4),  # rot4/rot4's default (sm_90, Triton 3.6)
        (168, 2, 6),  # 5,376 a warp: 3 a sub-partition
        (128, 4, 4),
        (152, 4, 3),
        (256, 1, 8),
    ],
)
def test_registers_are_counted_per_sub_partition(regs, warps, expected):
    # CUDA's occupancy calculator: warps an SM = 4 * floor(16,384 / registers a warp)
    assert programs_per_sm(regs, warps, 0, H100) == expected


def test_a_kernel_that_launched_fits_at_least_once():
    assert programs_per_sm(255, 32, 300_000, H100) == 1
