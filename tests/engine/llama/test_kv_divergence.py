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


def test_the_check_goes_to_a_gpu_only_with_room_beside_the_engine(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from engine.gguf import read_model_info
    from engine.hearth import kv_divergence as kd
    from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

    info = read_model_info(write_tiny_gguf(tmp_path / "tiny.gguf", tiny_spec("llama")))
    need = kd.check_bytes(info, 384) + kd.GPU_SPARE
    values = sum(t.n_elements for t in info.tensors)
    # float32 weights beside the stored ones, four float32 arrays of the text's logits
    assert need - kd.GPU_SPARE == (
        4 * values + sum(t.n_bytes for t in info.tensors) + 16 * 384 * info.vocab_size
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for free, where in ((need, "cuda"), (need - 1, "cpu")):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda free=free: (free, 2 * need))
        assert kd.check_device(info, 384) == where
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert kd.check_device(info, 384) == "cpu"


@pytest.mark.gpu
def test_the_check_on_a_gpu_agrees_with_the_cpu(tmp_path):
    """One pass per format on the GPU, chunks on the CPU: the same figures."""
    pytest.importorskip("torch")
    from engine.hearth.kv_divergence import hearth_kv_divergence
    from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

    model = str(write_tiny_gguf(tmp_path / "tiny.gguf", tiny_spec("llama")))
    tokens = list(range(3, 67))
    pairs = [("q8", "q8"), ("rot4", "rot4")]
    cpu = hearth_kv_divergence(model, tokens, pairs, device="cpu", chunk=16)
    gpu = hearth_kv_divergence(model, tokens, pairs, device="cuda")
    for pair in pairs:
        assert gpu[pair].positions == cpu[pair].positions == 64
        assert gpu[pair].mean_kl == pytest.approx(cpu[pair].mean_kl, rel=0.05, abs=1e-5)
