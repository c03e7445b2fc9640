"""The forward pass on kernels/ (KernelsOps) against the plain reference, on tiny models, on the
CPU through Triton's interpreter (slow, so two architectures and a short prompt); on a GPU,
test_gpu.py runs the same comparisons at its own tolerances (f16 activations there)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys

import numpy as np
import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (triton) is not installed", allow_module_level=True)

import torch

# Triton reads TRITON_INTERPRET when it is first imported (tests/kernels/conftest.py does the same)
assert "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") is not None
if torch.cuda.is_available():  # these build CPU tensors; test_gpu.py is the GPU's version
    pytest.skip("the GPU path is tested by test_gpu.py", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"

from engine.gguf import read_model_info  # noqa: E402
from engine.hearth.config import model_config  # noqa: E402
from engine.hearth.ops import KernelsOps, PreparedWeight, TorchOps, select_ops  # noqa: E402
from engine.hearth.reference import reference_logits  # noqa: E402
from engine.hearth.weights import GGUFTensors  # noqa: E402
from tests.engine.hearth import test_forward  # noqa: E402
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class _CountedQuantization:
    """Counts the activation quantization launches (kernels.act_quant.quantize_activation,
    whichever module calls it) while installed."""

    def __init__(self, monkeypatch):
        import kernels.act_quant
        import kernels.gemv_dp4a

        self.shapes = []
        quantize = kernels.act_quant.quantize_activation

        def counted(x, **kw):
            self.shapes.append(x.shape)
            return quantize(x, **kw)

        monkeypatch.setattr(kernels.act_quant, "quantize_activation", counted)
        monkeypatch.setattr(kernels.gemv_dp4a, "quantize_activation", counted)


def _run(path, ops) -> tuple[np.ndarray, int]:
    """test_forward's engine run over its first 9 tokens (chunks of 4, 1 and 3 rows, then a
    decode step): (the logits, how many quantization launches it took). The chunks of 3 and 4
    rows take the dequantized matrices' product here, not the integer GEMV the engine gives up
    to kernels.gemv.DP4A_MAX_ROWS rows: that GEMV at several rows is tested on its own
    (tests/kernels/test_gemv_dp4a.py) and costs minutes in the interpreter."""
    import kernels.gemv

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(kernels.gemv, "DP4A_MAX_ROWS", 1)
        monkeypatch.setattr(test_forward, "TOKENS", test_forward.TOKENS[:9])
        launches = _CountedQuantization(monkeypatch)
        return test_forward.run_engine(path, ops=ops), len(launches.shapes)


@pytest.fixture(scope="module")
def qwen3_path(tmp_path_factory):
    """qwen3 with its Q4_K gate/up 64 rows each, not 512: a Q4_K matrix of 256 inputs at one
    row takes the integer GEMV's one path (4 rows a program, the row one step: no long_rows,
    no tall_rows) whatever its rows, and the interpreter's time goes by programs, so the
    feed-forward (128 rows a layer, not 1024) no longer takes most of each run's time."""
    spec = tiny_spec("qwen3", n_layer=2, n_ff=64)
    return write_tiny_gguf(tmp_path_factory.mktemp("k") / "qwen3.gguf", spec)


@pytest.fixture(scope="module")
def qwen3_kernels_run(qwen3_path):
    """KernelsOps' run of the qwen3 model, shared by the tests that compare it with a
    reference or with another configuration of the kernels (one interpreter run, not three)."""
    ops = select_ops(DEVICE, kernels=True)
    assert isinstance(ops, KernelsOps)
    return _run(qwen3_path, ops)


def _reference(path) -> np.ndarray:
    info = read_model_info(path)
    tokens = test_forward.TOKENS[:9]
    return reference_logits(model_config(info), GGUFTensors(str(path), info), tokens)


def test_llama_on_the_kernels_matches_the_reference(tmp_path):
    """Q4_0/Q8_0/F16 matrices: the float GEMV, float32 inputs."""
    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama", n_layer=2))
    ops = select_ops(DEVICE, kernels=True)
    assert isinstance(ops, KernelsOps)
    got, _ = _run(path, ops)
    expected = _reference(path)
    np.testing.assert_allclose(got, expected, atol=2e-3 * max(1.0, np.abs(expected).max()))


def test_llama_with_q8_0_through_the_integer_gemv_matches_the_reference(tmp_path, monkeypatch):
    """The Q8_0 matrices' single rows take the integer GEMV (gemv_q8_0.py: their default, which
    the conftest turns off for the other tests), x in 8 bits from the norms and the attention's
    reduce as for Q4_K; within 8-bit x's error of the reference over the whole logits, as
    qwen3's Q4_K below."""
    import kernels.gemv
    import kernels.gemv_q8_0

    monkeypatch.setattr(kernels.gemv, "Q8_0_INTEGER_MAX_ROWS", 1)
    calls = []
    integer_gemv = kernels.gemv_q8_0.matmul

    def counted(x, *args):
        calls.append(x.shape[0])
        return integer_gemv(x, *args)

    monkeypatch.setattr(kernels.gemv_q8_0, "matmul", counted)
    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama", n_layer=1))
    got, launches = _run(path, select_ops(DEVICE, kernels=True))
    assert calls and set(calls) == {1}  # the single rows' Q8_0 matrices, every layer's
    expected = _reference(path)
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(got[:4], expected[:4], atol=2e-3 * scale)  # the 4-row chunk
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert error < 3e-2
    assert launches == 0  # every 8-bit x came from the kernel that produced it


def test_qwen3_on_the_kernels_matches_the_reference(qwen3_path, qwen3_kernels_run):
    """qwen3's Q4_K matrices: the first chunk (4 rows) takes the dequantized matrix's product
    (_run), exact up to float32; single rows take the integer GEMV, inputs in 8 bits as
    llama.cpp's MMVQ does: 0.3-0.9% per product (tests/kernels/test_gemv_dp4a.py), about 8
    products in series through 2 layers, so a few percent over the whole logits (1.6%
    measured)."""
    got, _ = qwen3_kernels_run
    expected = _reference(qwen3_path)
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(got[:4], expected[:4], atol=2e-3 * scale)
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert error < 3e-2


class _UnfusedOps(KernelsOps):
    """KernelsOps with the norms and SwiGLU unfused: their outputs quantized apart (by the
    GEMV's own launch, or one shared_input launch)."""

    rms_norm_for = TorchOps.rms_norm_for
    gated_ffn_activation_for = TorchOps.gated_ffn_activation_for
    empty_shared = TorchOps.empty_shared


def test_fused_quantization_gives_the_same_logits_in_fewer_launches(qwen3_path, qwen3_kernels_run):
    fused, n_fused = qwen3_kernels_run
    unfused, n_unfused = _run(qwen3_path, _UnfusedOps(DEVICE))
    # the same 8-bit codes reach the same GEMVs: the same logits, bit for bit
    np.testing.assert_array_equal(fused, unfused)
    # qwen3's Q/K norms and RoPE sit between its GEMVs; per decode step and layer only the
    # attention output's quantization is left (and none for the output matrix)
    assert n_fused < n_unfused / 2, (n_fused, n_unfused)


def test_weights_stay_packed_as_stored(tmp_path):
    from engine.hearth.forward import Transformer

    path = write_tiny_gguf(tmp_path / "qwen3.gguf", tiny_spec("qwen3", n_layer=1))
    info = read_model_info(path)
    model = Transformer.load(model_config(info), GGUFTensors(str(path), info), KernelsOps(DEVICE))
    layer = model.layers[0]
    first = layer.attn_in[0]
    assert type(first.weight).__name__ == "PackedWeight"  # Q4_K blocks as stored, on the device
    names = [f"blk.0.attn_{part}.weight" for part in first.parts]
    # joined with the matrices of the same type that follow it, byte for byte
    assert first.parts[0] == "q" and len(first.parts) >= 2
    assert first.weight.nbytes == sum(info.tensor(name).n_bytes for name in names)
    assert not isinstance(layer.wo, PreparedWeight)  # F16: packed too


def test_paged_cache_matches_the_same_formats_simulated_in_torch(tmp_path):
    """kernels' paged cache (write kernel, flash-decoding attention, readback for prefill)
    against the plain cache storing rows through kernels' numpy reference of the formats."""
    from engine.hearth.forward import Transformer
    from engine.hearth.kv_cache import TorchKVCache
    from engine.hearth.paged_cache import PagedCacheAdapter
    from kernels.kv_formats import reference_roundtrip

    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama", n_layer=2))
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), KernelsOps(DEVICE))
    dims = dict(n_layer=2, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=16)

    def codec(fmt):
        return lambda rows: torch.from_numpy(reference_roundtrip(fmt, rows.float().numpy()))

    simulated = TorchKVCache(
        **dims, dtype=torch.float32, k_codec=codec("q8"), v_codec=codec("rot4")
    )
    paged = PagedCacheAdapter(**dims, device=DEVICE, k_format="q8", v_format="rot4")
    tokens = [5, 17, 300, 42, 0, 99]
    rows = {}
    for name, cache in (("simulated", simulated), ("paged", paged)):
        out = [model.forward(torch.tensor(tokens[:4]), torch.arange(4), cache, n_keys=4)]
        for pos in (4, 5):  # decode steps: the paged cache's own attention kernel
            step = model.forward(torch.tensor([tokens[pos]]), torch.tensor([pos]), cache, n_keys=16)
            out.append(step)
        rows[name] = torch.stack(out).numpy()
    scale = np.abs(rows["simulated"]).max()
    np.testing.assert_allclose(rows["paged"], rows["simulated"], atol=1e-2 * scale)


def test_the_decode_attention_quantizes_wo_s_input_in_its_own_launch(qwen3_path, monkeypatch):
    """A decode step on the paged cache: the attention's reduce writes its output in 8 bits
    for wo's integer GEMV (Q4_K; the tiny files store wo in F16, so random Q4_K blocks stand
    in), so the quantization launch before wo is gone from every layer, and the logits are
    the same bits as with that launch. The 3-token chunk before the step, which only fills
    the cache, takes the dequantized matrices' product (the integer GEMV at several rows costs
    minutes in the interpreter: _run says why)."""
    import kernels.gemv
    from engine.hearth.forward import Transformer
    from engine.hearth.paged_cache import PagedCacheAdapter
    from kernels.packed_weight import PackedWeight
    from kernels.reference import random_weight_bytes

    class Unfused(PagedCacheAdapter):
        fills_quantized = False

    monkeypatch.setattr(kernels.gemv, "DP4A_MAX_ROWS", 1)
    info = read_model_info(qwen3_path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(qwen3_path), info), KernelsOps(DEVICE))
    for i, layer in enumerate(model.layers):
        shape = (layer.wo.n_out, layer.wo.n_in)
        raw = random_weight_bytes("Q4_K", *shape, seed=i)
        layer.wo = PackedWeight.from_gguf(raw, "Q4_K", shape, device=DEVICE)
    dims = dict(n_layer=config.n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim)
    rows, launches = {}, {}
    for name, kind in (("fused", PagedCacheAdapter), ("unfused", Unfused)):
        cache = kind(**dims, n_ctx=16, device=DEVICE, k_format="f16", v_format="f16")
        model.forward(torch.tensor([5, 17, 300]), torch.arange(3), cache, n_keys=3)
        with pytest.MonkeyPatch.context() as monkeypatch:
            counted = _CountedQuantization(monkeypatch)
            step = model.forward(torch.tensor([42]), torch.tensor([3]), cache, n_keys=16)
        rows[name], launches[name] = step.numpy(), len(counted.shapes)
    np.testing.assert_array_equal(rows["fused"], rows["unfused"])
    assert launches["unfused"] - launches["fused"] == config.n_layer, launches


def test_the_chained_gemv_is_the_default_config_where_the_device_chains_launches(qwen3_path):
    """KernelsOps takes gemv's default config, the chained integer GEMV at one row, only where
    the device has programmatic dependent launch (chained_gemv); elsewhere the same tiles
    launched plainly. That both compute the same is tests/kernels/test_gemv_dp4a.py's (the
    chained configs against the same references as the plain ones)."""
    from kernels.gemv import default_config

    info = read_model_info(qwen3_path)
    ops = KernelsOps(DEVICE)
    assert not ops.chained_gemv  # no programmatic dependent launch on the CPU
    weight = ops.prepare(GGUFTensors(str(qwen3_path), info).matrix("blk.0.attn_q.weight"))
    chained = default_config("Q4_K", 1)
    assert chained.path == "dp4a" and chained.chained
    plain = ops._gemv_config(weight, 1)
    assert not plain.chained and not plain.early_next
    assert plain == dataclasses.replace(chained, chained=False, early_next=False)
    ops.chained_gemv = True
    assert ops._gemv_config(weight, 1) == chained


def test_the_kv_write_rotates_a_step_s_and_a_check_s_rows_not_a_prefill_chunk_s():
    """KernelsOps.write_rotating: RoPE in the cache's write for one row and for a check's rows
    (`rows_as_one`); a prefill chunk's rows (None) take RoPE's own launch and the plain write,
    measured faster there on an H200 (docs/decisions/2026-11-29-rope-in-the-kv-write.md)."""
    from engine.hearth.rope import RopeTable
    from engine.hearth.verify import rows_as_one

    class Cache:
        def __init__(self):
            self.rows = []

        def write_rotating(self, layer, positions, q, k, v, rope, *, biases=None, norms=None):
            self.rows.append(q.shape[0])
            return q

    ops, cache = KernelsOps("cpu"), Cache()
    table = RopeTable(torch.ones(4, dtype=torch.float64), 1.0, "neox", 8)

    def write(n: int):
        q, kv = torch.zeros(n, 2, 8), torch.zeros(n, 1, 8)
        return ops.write_rotating(cache, 0, torch.arange(n), table, q, kv, kv, None, None, 1e-6)

    assert write(1) is not None
    assert write(3) is None
    with rows_as_one(ops):
        assert write(3) is not None
    assert cache.rows == [1, 3]


def test_a_decode_step_writes_and_attends_in_one_call_a_check_s_rows_do_not():
    """KernelsOps.write_and_attend: one row goes to the cache's attend_writing (the write in
    the attention's launch) with the attention's options; several rows (a speculative
    check's, each written as write_rotating writes a step's) and a cache without that call
    get None (the forward pass then writes, then attends)."""
    from engine.hearth.rope import RopeTable

    class Cache:
        def __init__(self):
            self.calls = []

        def attend_writing(self, layer, positions, q, k, v, rope, **options):
            self.calls.append((q.shape[0], options["biases"], options["scale"]))
            return q

    ops, cache = KernelsOps("cpu"), Cache()
    table = RopeTable(torch.ones(4, dtype=torch.float64), 1.0, "neox", 8)

    def step(n: int, on):
        q, kv = torch.zeros(n, 2, 8), torch.zeros(n, 1, 8)
        return ops.write_and_attend(on, 0, torch.arange(n), table, q, kv, kv, "biases",
                                    {"scale": 0.5})  # fmt: skip

    assert step(1, cache) is not None
    assert step(3, cache) is None
    assert step(1, object()) is None
    assert cache.calls == [(1, "biases", 0.5)]
