"""The KV check's measurement on the starter model, a few tokens long: llama.cpp's cache types
and the Hearth engine's formats against their own f16 cache."""

from __future__ import annotations

import pytest

from engine.llama.divergence import DivergenceSum, log_softmax

np = pytest.importorskip("numpy")


def test_kl_and_top1_against_a_reference():
    base = log_softmax(np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]]))
    same = DivergenceSum()
    same.add(base, base)
    assert same.result().mean_kl == 0.0 and same.result().same_top1 == 1.0
    moved = DivergenceSum()
    moved.add(log_softmax(np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]])), base)
    result = moved.result()
    p = np.exp(base[0])
    expected = (p * (base[0] - log_softmax(np.array([1.0, 2.0, 0.0])))).sum() / 2
    assert result.mean_kl == pytest.approx(expected) and result.same_top1 == 0.5
    assert result.positions == 2


def test_llama_cpp_cache_types_against_f16(starter_model):
    from engine.llama.kv_divergence import llama_kv_divergence
    from engine.session.kv_quality import check_tokens

    tokens = check_tokens(str(starter_model), max_tokens=24)
    found = llama_kv_divergence(str(starter_model), tokens, [("q4_0", "q4_0")], chunk=16,
                                threads=1)  # fmt: skip
    assert found[("f16", "f16")].mean_kl == 0.0 and found[("f16", "f16")].positions == 24
    q4 = found[("q4_0", "q4_0")]
    assert q4.positions == 24 and 0.0 < q4.mean_kl < 1.0


def test_the_hearth_formats_against_f16(tmp_path):
    pytest.importorskip("torch")
    from engine.hearth.kv_divergence import hearth_kv_divergence
    from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

    # a tiny llama with random weights (head size 32): the engine's CPU path in a second
    model = str(write_tiny_gguf(tmp_path / "tiny.gguf", tiny_spec("llama")))
    tokens = list(range(3, 19))
    found = hearth_kv_divergence(model, tokens, [("q8", "q8"), ("rot4", "rot4")], chunk=8)
    assert found[("f16", "f16")].mean_kl == 0.0 and found[("f16", "f16")].positions == 16
    assert 0.0 < found[("q8", "q8")].mean_kl < found[("rot4", "rot4")].mean_kl
    with pytest.raises(ValueError, match="kivi4"):
        hearth_kv_divergence(model, tokens, [("kivi4", "rot4")])
