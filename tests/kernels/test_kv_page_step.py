"""Changes to the decode attention's step, against the same attention without them and against
the float64 reference: the position mask only on pages some query row does not see whole
(AttentionTuning.mask_tail, session 9); the split kernel launched as the previous launch's
dependent (chain_launches, session 10: the interpreter runs it as before, the GPU test
launches it so); reduce programs of one warp (reduce_warps: the flag set True is 1, the
fewest; the default is 4 since session 10); kivi4 K's tile built 2-D (flat_kivi_k)."""

from __future__ import annotations

import pytest
import torch

from kernels import reference
from kernels.decode_launch import MASK_TAIL_PAIRS, AttentionTuning
from tests.kernels.conftest import relative_error
from tests.kernels.test_kv_one_launch import ATTENTION_TOLERANCE, _filled

FLAGS = ["mask_tail", "chain_launches", "reduce_warps", "flat_kivi_k"]
PAIRS = [("f16", "f16"), ("rot4", "rot4"), ("q8", "rot4"), ("rot4", "f16"), ("kivi4", "rot4")]


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize(("k_format", "v_format"), PAIRS)
@pytest.mark.parametrize("window", [0, 40])
def test_each_step_flag_gives_the_same_attention(k_format, v_format, flag, window, device):
    """75 positions on pages of 32 (the last page part-filled: the mask still needed there),
    with and without a sliding window (every page masked)."""
    cache, seq, (k_ref, v_ref) = _filled(k_format, v_format, device, 75, dim=64, page=32)
    q = torch.randn(1, 8, 64, generator=torch.Generator().manual_seed(9))
    outs = []
    for on in (False, True):
        cache.tuning = AttentionTuning(**{flag: on})
        outs.append(cache.attend(0, q.to(device), [seq], window=window).float().cpu())
    assert relative_error(outs[1], outs[0]) < 1e-5
    if k_format != "kivi4" and not window:  # kivi4's open page is exact, not the reference's
        expected = reference.decode_attention(q[0].numpy(), k_ref, v_ref, 64**-0.5)
        assert relative_error(outs[1][0], expected) < ATTENTION_TOLERANCE


@pytest.mark.parametrize(("k_format", "v_format"), [("rot4", "rot4"), ("f16", "f16")])
def test_the_mask_where_draft_tokens_see_different_positions(k_format, v_format, device):
    """Three query tokens (verifying drafts) at positions 62, 63 and 64 of 65 on pages of 32:
    page 1 is whole for none of them but the last, so it keeps its mask."""
    cache, seq, _ = _filled(k_format, v_format, device, 65, dim=64, page=32)
    q = torch.randn(1, 3, 8, 64, generator=torch.Generator().manual_seed(10)).to(device)
    outs = []
    for on in (False, True):
        cache.tuning = AttentionTuning(mask_tail=on)
        outs.append(cache.attend(0, q, [seq]).float().cpu())
    assert relative_error(outs[1], outs[0]) < 1e-5


def test_mask_tail_is_on_by_default_only_for_the_measured_pairs():
    tuning = AttentionTuning()
    assert {("rot4", "rot4")} == MASK_TAIL_PAIRS
    assert tuning.masks_tail("rot4", "rot4")
    assert not tuning.masks_tail("f16", "f16")
    assert not AttentionTuning(mask_tail=False).masks_tail("rot4", "rot4")
    assert AttentionTuning(mask_tail=True).masks_tail("q8", "rot4")


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("k_format", "v_format"), [("rot4", "rot4"), ("q8", "rot4"), ("f16", "f16")]
)
def test_the_step_flags_at_the_llama3_8b_shape(k_format, v_format):
    """On the GPU at Llama-3-8B's shape (3,000 positions, the inline assembly): each flag on
    and off, and both, against the reference and each other."""
    from tests.kernels.test_kv_cache import _llama3_8b_cache

    cache, seq, q, expected = _llama3_8b_cache(k_format, v_format, 3000)
    cache.tuning = AttentionTuning(mask_tail=False)
    before = cache.attend(0, q, [seq]).float().cpu()
    for flags in [{f: True} for f in FLAGS] + [dict.fromkeys(FLAGS, True)]:
        cache.tuning = AttentionTuning(**flags)
        out = cache.attend(0, q, [seq]).float().cpu()
        assert relative_error(out[0], expected) < 5e-3, flags
        assert relative_error(out, before) < 1e-4, flags


@pytest.mark.gpu
def test_flat_kivi4_keys_at_the_llama3_8b_shape():
    """kivi4 K's 2-D tile (flat_kivi_k) on the GPU at Llama-3-8B's shape (3,000 positions: 46
    sealed pages and the open one), against the reshaped tile, whose kivi4 GPU tests hold it
    to the reference (test_kv_kivi.py)."""
    from tests.kernels.test_kv_cache import _llama3_8b_cache

    cache, seq, q, _ = _llama3_8b_cache("kivi4", "rot4", 3000)
    outs = []
    for flat in (False, True):
        cache.tuning = AttentionTuning(flat_kivi_k=flat)
        outs.append(cache.attend(0, q, [seq]).float().cpu())
    assert relative_error(outs[1], outs[0]) < 1e-4
