"""benchmarks/kernels/attention.py: which launches a run times (no GPU needed to choose them)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch", reason="the attention benchmark needs torch")

from benchmarks.kernels import attention
from kernels.decode_launch import AttentionTuning


def _flags_on(tunings) -> list[tuple[str, ...]]:
    """Each tuning as the flags it turns on (None: the cache's default, none), checked
    against what measure makes of it (an AttentionTuning and whether q comes prepared)."""
    flags = []
    for t in tunings:
        on = () if t is None else tuple(attention.flags_changed(t))
        tuning, prepared = attention._variant(t)
        assert prepared == ("q_prepared" in on)
        row = {**dataclasses.asdict(tuning or AttentionTuning()), "q_prepared": prepared}
        assert tuple(attention.flags_changed(row)) == on
        flags.append(on)
    return flags


def test_each_flag_sits_between_timings_of_the_default():
    tunings = attention.flag_comparison("rot4", ["rotate_q_once", "sum_after_loop"])
    assert _flags_on(tunings) == [
        (), ("rotate_q_once",), (), ("sum_after_loop",), (),
        ("rotate_q_once", "sum_after_loop"), (),
    ]  # fmt: skip


def test_q_rotated_once_is_timed_only_for_rotated_keys():
    assert _flags_on(attention.flag_comparison("q8", ["rotate_q_once"])) == [()]
    tunings = attention.flag_comparison("f16", ["rotate_q_once", "sum_after_loop"])
    assert _flags_on(tunings) == [(), ("sum_after_loop",), ()]
    assert _flags_on(attention.flag_comparison("rot4", [])) == [()]


def test_the_fused_reduce_and_prepared_queries_are_timed_alone_and_together():
    tunings = attention.flag_comparison("rot4", ["fused_reduce", "q_prepared"])
    assert _flags_on(tunings) == [
        (), ("fused_reduce",), (), ("q_prepared",), (), ("fused_reduce", "q_prepared"), (),
    ]  # fmt: skip
    # q arrives prepared only over rotated keys
    tunings = attention.flag_comparison("q8", ["fused_reduce", "q_prepared"])
    assert _flags_on(tunings) == [(), ("fused_reduce",), ()]


def test_launch_labels_name_the_flags():
    tuning = {"programs_per_sm": 0, "num_warps": 2, "num_stages": 5, "overlap_reduce": True,
              "rotate_q_once": True, "sum_after_loop": True}  # fmt: skip
    assert attention.launch_label(tuning) == "fit/2/5 q once sum after loop"
    tuning.update(rotate_q_once=False, sum_after_loop=False, overlap_reduce=False)
    assert attention.launch_label(tuning) == "fit/2/5 serial reduce"
    tuning.update(overlap_reduce=True, fused_reduce=True, q_prepared=True)
    assert attention.launch_label(tuning) == "fit/2/5 fused reduce q prepared"


def test_a_register_cap_is_named_in_the_label():
    tuning = {"programs_per_sm": 0, "num_warps": 0, "num_stages": 5, "overlap_reduce": True,
              "sum_after_loop": True, "max_registers": 200}  # fmt: skip
    assert attention.launch_label(tuning) == "fit/auto/5 sum after loop max 200 regs"


def test_the_flat_v_tile_is_timed_only_for_rot4_values():
    """flat_v is on by default: its comparison turns it off."""
    tunings = attention.flag_comparison("q8", ["flat_v"], "rot4")
    assert _flags_on(tunings) == [(), ("flat_v",), ()]
    assert tunings[1] == {"flat_v": False}
    assert _flags_on(attention.flag_comparison("rot4", ["flat_v"], "q8")) == [()]


def test_flags_label_names_what_differs_from_the_default():
    row = {**dataclasses.asdict(AttentionTuning(flat_v=False, mask_tail=True)), "q_prepared": 0}
    assert attention.flags_label(row) == "  no flat V  mask tail"
