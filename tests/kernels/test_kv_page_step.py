"""The decode attention's step switches, against the same attention without them and against
the float64 reference: the position mask only on pages some query row does not see whole
(AttentionTuning.mask_tail); the split kernel launched as the previous launch's dependent
(chain_launches: the interpreter runs it as before, the GPU test launches it so); reduce
programs of one warp (reduce_warps: the flag set True is 1, the fewest)."""

from __future__ import annotations

import pytest
import torch

from kernels import reference
from kernels.decode_launch import MASK_TAIL_PAIRS, AttentionTuning
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec, reference_roundtrip
from tests.kernels.conftest import relative_error

ATTENTION_TOLERANCE = 3e-3  # as test_kv_cache.py: f16 tiles against float64


def _filled(k_format, v_format, device, n, heads=2, dim=32, page=16, tokens=256, seed=0):
    spec = KVCacheSpec(
        n_layers=1, n_kv_heads=heads, head_dim=dim, k_format=k_format, v_format=v_format,
        page_size=page, max_tokens=tokens,
    )  # fmt: skip
    cache = PagedKVCache(spec, device=device)
    gen = torch.Generator().manual_seed(seed)
    seq = cache.new_sequence()
    k, v = torch.randn(n, heads, dim, generator=gen), torch.randn(n, heads, dim, generator=gen)
    cache.write(0, seq, cache.grow(seq, n), k.to(device), v.to(device))
    rows = (reference_roundtrip(k_format, k.numpy()), reference_roundtrip(v_format, v.numpy()))
    return cache, seq, rows


FLAGS = ["mask_tail", "chain_launches", "reduce_warps"]
# chain_launches and reduce_warps change only how the kernels are launched (a dependent launch,
# the reduce's warps), which the interpreter ignores: they compute the same thing there as off,
# so only the GPU runs them at these shapes
LAUNCH_ONLY = {"chain_launches", "reduce_warps"}
PAIRS = [("f16", "f16"), ("rot4", "rot4"), ("q8", "rot4"), ("rot4", "f16"), ("kivi4", "rot4")]


@pytest.mark.parametrize(
    "flag", [pytest.param(f, marks=pytest.mark.gpu) if f in LAUNCH_ONLY else f for f in FLAGS]
)
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
