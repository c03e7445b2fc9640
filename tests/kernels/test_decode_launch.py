"""kernels/decode_launch.py: the decode attention's launch shape."""

from __future__ import annotations

import pytest
import torch

from kernels import decode_launch
from kernels.decode_launch import AttentionTuning


def test_warps_follow_the_format_pair_unless_given():
    tuning = AttentionTuning()
    assert tuning.warps("rot4", "rot4") == decode_launch.FASTEST_WARPS[("rot4", "rot4")]
    assert tuning.warps("f16", "f16") == 4
    assert tuning.warps("kivi4", "rot4") == 2  # its swept GPU test passed (session 8)
    assert tuning.warps("q8", "q8") == 4
    assert AttentionTuning(num_warps=8).warps("rot4", "rot4") == 8


def test_an_unknown_code_unpacking_is_refused_by_name():
    with pytest.raises(ValueError, match="'nibbles'"):
        AttentionTuning(code_unpack="nibbles")


def test_without_a_compiled_kernel_the_split_count_uses_a_fixed_count(monkeypatch):
    """Triton's interpreter (and a CPU tensor) has no registers to count."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q = torch.zeros(1, 1, 4, 32)
    assert decode_launch.fitting_programs(q, {}, ()) == decode_launch.INTERPRETER_PROGRAMS_PER_SM
    assert not decode_launch.has_dependent_launch(q.device)


def test_q_is_rotated_once_only_when_asked_and_for_rotated_keys():
    assert not AttentionTuning().prepares_queries("rot4")  # off until a GPU has timed it
    assert not AttentionTuning().sum_after_loop
    once = AttentionTuning(rotate_q_once=True)
    assert once.prepares_queries("rot4")
    assert once.prepares_queries("rot2")
    for k_format in ("f16", "q8", "kivi4"):  # keys not rotated: q is not either
        assert not once.prepares_queries(k_format)


def test_the_register_cap_is_a_compile_option_only_when_set():
    assert AttentionTuning().register_cap() == {}
    assert AttentionTuning(max_registers=200).register_cap() == {"maxnreg": 200}
