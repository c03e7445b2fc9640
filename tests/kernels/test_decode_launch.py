"""kernels/decode_launch.py: the decode attention's launch shape."""

from __future__ import annotations

import pytest
import torch

from kernels import decode_launch
from kernels.decode_launch import AttentionTuning
from kernels.launch import has_dependent_launch


def test_warps_follow_the_format_pair_unless_given():
    tuning = AttentionTuning()
    assert tuning.warps("rot4", "rot4") == decode_launch.FASTEST_WARPS[("rot4", "rot4")]
    assert tuning.warps("f16", "f16") == 4
    assert tuning.warps("kivi4", "rot4") == 2
    assert tuning.warps("q8", "q8") == 4
    assert AttentionTuning(num_warps=8).warps("rot4", "rot4") == 8


@pytest.mark.parametrize(
    ("chunk", "d_chunk", "warps"),
    [
        (256, 32, 4),  # Qwen3-30B-A3B at 32k: 132 splits a head
        (128, 32, 2),  # Llama-3-8B at 32k: 66
        (4, 32, 2),  # a small cache: never fewer than 2
        (256, 128, 8),  # never more than 8
    ],
)
def test_the_reduce_takes_warps_by_its_tile(chunk, d_chunk, warps):
    assert decode_launch.reduce_warps_for(chunk, d_chunk) == warps


def test_without_a_compiled_kernel_the_split_count_uses_a_fixed_count(monkeypatch):
    """Triton's interpreter (and a CPU tensor) has no registers to count."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q = torch.zeros(1, 1, 4, 32)
    assert decode_launch.fitting_programs(q, {}, ()) == decode_launch.INTERPRETER_PROGRAMS_PER_SM
    assert not has_dependent_launch(q.device)


def test_the_split_kernel_chains_only_where_the_reduce_overlaps_it(monkeypatch):
    """chain_launches needs the overlapped reduce (it lets the next launch start) and a device
    with dependent launches: never in the interpreter."""
    monkeypatch.setattr(decode_launch, "has_dependent_launch", lambda device: True)
    cuda = torch.device("cuda")
    assert AttentionTuning().chains(cuda)
    assert not AttentionTuning(overlap_reduce=False).chains(cuda)
    assert not AttentionTuning(chain_launches=False).chains(cuda)
