"""ops.moe_ffn on kernels/ (KernelsOps: the expert GEMV) against TorchOps' moe_ffn, on a tiny
MoE model's first layer, on the CPU through Triton's interpreter (test_gpu.py's device runs
cover the GPU); and a whole tiny qwen3moe forward on KernelsOps against the reference."""

from __future__ import annotations

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
if torch.cuda.is_available():  # these build CPU tensors
    pytest.skip("the GPU path is tested on the device", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"

from engine.gguf import read_model_info  # noqa: E402
from engine.hearth.config import model_config  # noqa: E402
from engine.hearth.moe_ops import PackedExperts  # noqa: E402
from engine.hearth.ops import KernelsOps, TorchOps  # noqa: E402
from engine.hearth.routing import select_experts  # noqa: E402
from engine.hearth.weights import GGUFTensors, QuantExperts  # noqa: E402
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf  # noqa: E402


def _layer_experts(tmp_path, arch: str):
    """Layer 0's experts prepared by TorchOps and by KernelsOps, the config, and the file."""
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=1))
    info = read_model_info(path)
    config = model_config(info)
    tensors = GGUFTensors(str(path), info)

    def prepared(ops):
        parts = [
            tensors.experts(f"blk.0.ffn_{k}_exps.weight", "cpu") for k in ("gate", "up", "down")
        ]
        biases = tuple(
            tensors.optional_float_tensor(f"blk.0.ffn_{k}_exps.bias")
            for k in ("gate", "up", "down")
        )
        return ops.prepare_experts(*parts, config.activation, biases)

    return config, prepared(TorchOps("cpu")), prepared(KernelsOps("cpu"))


def _routed(config, n_tokens: int, seed: int):
    """x [T, n_embd] and random router logits [T, n_expert]."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tokens, config.n_embd, generator=gen)
    logits = torch.randn(n_tokens, config.moe.n_expert, generator=gen)
    return x, logits


@pytest.mark.parametrize(
    ("arch", "n_tokens"),
    [
        ("qwen3moe", 2),
        ("gpt-oss", 2),
        pytest.param("qwen3moe", 1, marks=pytest.mark.slow),
        pytest.param("gpt-oss", 3, marks=pytest.mark.slow),
        pytest.param("qwen2moe", 2, marks=pytest.mark.slow),
    ],
)
def test_kernel_moe_ffn_matches_torch(arch, n_tokens, tmp_path):
    """Q4_0 (qwen3moe), MXFP4 with biases and the clamped SwiGLU (gpt-oss), Q8_0 (qwen2moe):
    the kernels round x to 8 bits per 32 values (as llama.cpp's MMVQ does), which is the
    whole difference from TorchOps' float32 products: about 1% of the output's norm."""
    config, torch_experts, kernel_experts = _layer_experts(tmp_path, arch)
    assert isinstance(kernel_experts, PackedExperts)
    assert kernel_experts.activation.kind == config.activation
    x, logits = _routed(config, n_tokens, seed=n_tokens)
    expected = TorchOps("cpu").moe_ffn(x, torch_experts, logits, config.moe)
    got = KernelsOps("cpu").moe_ffn(x, kernel_experts, logits, config.moe)
    assert got.shape == expected.shape and got.dtype == x.dtype
    error = float(torch.linalg.norm(got - expected) / torch.linalg.norm(expected))
    assert error < 2e-2, error


@pytest.mark.parametrize("in_host_memory", [False, True])
def test_a_decode_step_s_down_takes_the_one_token_kernel_unless_read_over_the_bus(
    in_host_memory, tmp_path, monkeypatch
):
    """One token: the down through kernels/moe_one_token.py, except for experts read in place
    from host memory (expert_offload.read_in_place marks their ExpertWeights), where the
    grouped kernel was faster over the bus; the same sum either way."""
    import dataclasses

    from kernels import moe_one_token

    config, _, experts = _layer_experts(tmp_path, "qwen3moe")

    def placed(in_host: bool):
        down = dataclasses.replace(experts.down, in_host_memory=in_host)
        return dataclasses.replace(experts, down=down)

    x, logits = _routed(config, 1, seed=5)
    calls = []
    launch = moe_one_token.launch_down
    monkeypatch.setattr(
        moe_one_token, "launch_down", lambda *a, **k: calls.append(1) or launch(*a, **k)
    )
    got = KernelsOps("cpu").moe_ffn(x, placed(in_host_memory), logits, config.moe)
    assert len(calls) == (0 if in_host_memory else 1)
    other = KernelsOps("cpu").moe_ffn(x, placed(not in_host_memory), logits, config.moe)
    torch.testing.assert_close(other, got)


def test_experts_read_over_the_bus_are_marked_so(tmp_path):
    """read_in_place marks the kernels' ExpertWeights (what expert_down reads to keep the
    grouped down); torch's experts have no such choice and stay as they are."""
    from engine.hearth.expert_offload import marked_in_host_memory

    _, torch_experts, kernel_experts = _layer_experts(tmp_path, "qwen3moe")
    marked = marked_in_host_memory(kernel_experts)
    assert all(w.in_host_memory for w in (marked.gate, marked.up, marked.down))
    assert (
        not kernel_experts.down.in_host_memory and marked.down.packed is kernel_experts.down.packed
    )
    assert marked_in_host_memory(torch_experts) is torch_experts


def test_chunks_past_one_launch_are_split_by_tokens(tmp_path, monkeypatch):
    """More (token, slot) pairs than one launch takes (MAX_PAIRS, made 2 here: 1 token of
    top-2) go through the kernels in slices of tokens: the same rows as in one launch."""
    import kernels.moe_routing

    config, _, experts = _layer_experts(tmp_path, "qwen3moe")
    x, logits = _routed(config, 2, seed=7)
    ops = KernelsOps("cpu")
    whole = ops.moe_ffn(x, experts, logits, config.moe)
    calls = []
    route = kernels.moe_routing.select_and_route

    def counted(logits, top_k, **kwargs):
        calls.append(logits.shape[0])
        return route(logits, top_k, **kwargs)

    monkeypatch.setattr(kernels.moe_routing, "MAX_PAIRS", 2)
    monkeypatch.setattr(kernels.moe_routing, "select_and_route", counted)
    got = ops.moe_ffn(x, experts, logits, config.moe)
    assert calls == [1, 1]
    torch.testing.assert_close(got, whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["qwen3moe", "gpt-oss"])
def test_chunks_past_the_threshold_take_the_grouped_gemm(arch, tmp_path, monkeypatch):
    """Past MOE_GEMM_MIN_TOKENS tokens (made 4 here; a chunk of 4 still takes the expert GEMV)
    a chunk goes through the grouped GEMM (kernels/moe_grouped_gemm.py: f16 tiles, no 8-bit x),
    picked and given its experts as select_experts does: within TorchOps' float32 products'
    tolerance, through moe_ffn and moe_ffn_selected alike, and through moe_ffn_from_router
    (the router's GEMV, then the GEMM: not route_from_router's expert GEMV)."""
    import kernels.moe_grouped_gemm

    config, torch_experts, kernel_experts = _layer_experts(tmp_path, arch)
    x, logits = _routed(config, 5, seed=11)
    calls = []
    grouped = kernels.moe_grouped_gemm.grouped_moe

    def counted(x, *args, **kwargs):
        calls.append(x.shape[0])
        return grouped(x, *args, **kwargs)

    monkeypatch.setattr(kernels.moe_grouped_gemm, "grouped_moe", counted)
    at_threshold, gemv_rows = KernelsOps("cpu"), []  # 4 tokens: the expert GEMV (not run)
    monkeypatch.setattr(at_threshold, "MOE_GEMM_MIN_TOKENS", 4)
    monkeypatch.setattr(at_threshold, "_expert_gemv", lambda x, *_: gemv_rows.append(len(x)) or x)
    at_threshold.moe_ffn(x[:4], kernel_experts, logits[:4], config.moe)
    assert gemv_rows == [4] and calls == []
    ops = KernelsOps("cpu")
    monkeypatch.setattr(ops, "MOE_GEMM_MIN_TOKENS", 4)
    expected = TorchOps("cpu").moe_ffn(x, torch_experts, logits, config.moe)
    got = ops.moe_ffn(x, kernel_experts, logits, config.moe)
    ids, weights = select_experts(
        logits, config.moe.n_expert_used, gating=config.moe.gating, normalize=config.moe.normalize
    )
    selected = ops.moe_ffn_selected(x, kernel_experts, ids, weights)
    assert calls == [5, 5]
    assert got.shape == expected.shape and got.dtype == x.dtype
    error = float(torch.linalg.norm(got - expected) / torch.linalg.norm(expected))
    assert error < 1e-2, error
    torch.testing.assert_close(selected, got)
    path = tmp_path / f"{arch}.gguf"
    tensors = GGUFTensors(str(path), read_model_info(path))
    router = ops.prepare(tensors.matrix("blk.0.ffn_gate_inp.weight", "cpu"))
    bias = tensors.optional_float_tensor("blk.0.ffn_gate_inp.bias")
    from_router = ops.moe_ffn_from_router(x, router, kernel_experts, config.moe, bias)
    assert calls == [5, 5, 5]
    routed = ops.moe_ffn(x, kernel_experts, ops.matmul(x, router), config.moe, bias)
    torch.testing.assert_close(from_router, routed)


def test_an_expert_type_without_a_gemv_is_refused_at_load(tmp_path):
    """F16 experts (no expert GEMV): a ValueError naming the tensor and the kernels' reason."""
    _, torch_experts, _ = _layer_experts(tmp_path, "qwen3moe")
    gate = torch_experts.gate
    data = torch.zeros(gate.n_expert, gate.rows, gate.cols, dtype=torch.float16)
    f16 = QuantExperts(gate.name, 1, gate.n_expert, gate.rows, gate.cols, data)
    with pytest.raises(ValueError, match=r"ffn_gate_exps.weight \(F16\): .*no expert GEMV"):
        KernelsOps("cpu").prepare_experts(f16, torch_experts.up, torch_experts.down, "silu")


def test_expert_tensors_given_as_readers_are_read_one_at_a_time(tmp_path):
    """Readers in place of the tensors (what a load passes): each tensor is read only once
    the one before it is in planes and its file copy dropped, so the device holds one file
    copy at a time; the planes are those the tensors themselves give."""
    import gc
    import weakref

    config, _, resident = _layer_experts(tmp_path, "qwen3moe")
    info = read_model_info(tmp_path / "qwen3moe.gguf")
    tensors = GGUFTensors(str(tmp_path / "qwen3moe.gguf"), info)
    read, alive_at_read = [], []

    def reader(kind):
        def read_one():
            gc.collect()
            alive_at_read.append([kind for kind, ref in read if ref() is not None])
            w = tensors.experts(f"blk.0.ffn_{kind}_exps.weight", "cpu")
            data = w.data.clone()  # a copy of its own, as an upload to the device makes
            w = QuantExperts(w.name, w.ggml_type, w.n_expert, w.rows, w.cols, data)
            read.append((kind, weakref.ref(data)))
            return w

        return read_one

    packed = KernelsOps("cpu").prepare_experts(
        *(reader(k) for k in ("gate", "up", "down")), config.activation
    )
    assert [kind for kind, _ in read] == ["gate", "up", "down"]
    assert alive_at_read == [[], [], []]
    for name in ("gate", "up", "down"):
        ours, theirs = getattr(packed, name).packed.planes, getattr(resident, name).packed.planes
        assert ours.keys() == theirs.keys()
        for plane in ours:
            assert torch.equal(ours[plane], theirs[plane]), (name, plane)


@pytest.mark.slow
def test_kernels_forward_of_a_moe_model_matches_the_reference(tmp_path, monkeypatch):
    """A whole tiny qwen3moe (prefill chunks and decode steps) on KernelsOps: the dense
    matrices' and the experts' 8-bit activations together stay within a few percent."""
    from engine.hearth.reference import reference_logits
    from tests.engine.hearth import test_forward

    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", tiny_spec("qwen3moe", n_layer=2))
    monkeypatch.setattr(test_forward, "TOKENS", test_forward.TOKENS[:9])
    info = read_model_info(path)
    expected = reference_logits(
        model_config(info), GGUFTensors(str(path), info), test_forward.TOKENS
    )
    got = test_forward.run_engine(path, ops=KernelsOps("cpu"))
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert error < 3e-2, error


@pytest.mark.slow
def test_a_decode_step_s_down_over_the_experts_rows_matches_the_reference(tmp_path):
    """qwen3moe with Q4_K experts of whole super-blocks (n_ff_exp 256): a decode step's down
    goes through kernels/moe_down_dp4a.py (one integer GEMV over the picked experts' rows); its
    logits are the one-token slots down's up to the order of the sums, with the same picks,
    and within the 8-bit activations' few percent of engine/hearth/reference.py's."""
    from gguf import GGMLQuantizationType as QT

    from engine.hearth.reference import reference_logits
    from kernels import moe_down_dp4a, moe_gemv

    spec = tiny_spec("qwen3moe", n_layer=1, n_embd=256, head_dim=64, matrix_type=QT.Q4_K,
                     n_ff_exp=256, expert_type=QT.Q4_K)  # fmt: skip
    path = write_tiny_gguf(tmp_path / "q.gguf", spec)
    calls = []
    launch = moe_down_dp4a.launch_down
    down = moe_gemv.expert_down

    def counted(monkeypatch):
        monkeypatch.setattr(
            moe_down_dp4a, "launch_down", lambda *a, **k: calls.append(1) or launch(*a, **k)
        )

    def slots(monkeypatch):
        counted(monkeypatch)
        monkeypatch.setattr(moe_gemv, "expert_down", lambda *a, **k: down(*a, dense=False, **k))

    dense = _decode_step(path, counted)
    assert len(calls) == 1  # the decode step's one layer; the prefill's 3 tokens go grouped
    apart = _decode_step(path, slots)
    assert len(calls) == 1
    for a, b in zip(dense["picks"], apart["picks"], strict=True):
        assert torch.equal(a, b)
    scale = np.abs(apart["logits"]).max()
    np.testing.assert_allclose(dense["logits"], apart["logits"], rtol=0, atol=2e-3 * scale)
    info = read_model_info(path)
    expected = reference_logits(model_config(info), GGUFTensors(str(path), info),
                                [5, 17, 300, 42])[-1]  # fmt: skip
    got = dense["logits"].reshape(-1)
    assert np.linalg.norm(got - expected) / np.linalg.norm(expected) < 3e-2


def test_experts_in_ram_are_the_gemvs_planes_and_copy_by_rows(tmp_path):
    """KernelsOps with the layer's experts in host memory and 3 slots: the host experts are
    the expert GEMV's own planes (the same bytes as prepared on the device), the slots start
    with experts 0-2, and copying expert e into slot s copies e's rows of every plane. (The
    GEMV on the slots runs in tests/engine/hearth/test_gpu.py; the slot ids and batches in
    test_expert_offload.py.)"""
    config, _, resident = _layer_experts(tmp_path, "qwen3moe")
    info = read_model_info(tmp_path / "qwen3moe.gguf")
    tensors = GGUFTensors(str(tmp_path / "qwen3moe.gguf"), info)
    parts = [tensors.experts(f"blk.0.ffn_{k}_exps.weight") for k in ("gate", "up", "down")]
    in_ram = KernelsOps("cpu").prepare_experts_in_ram(*parts, config.activation, n_slots=3)
    assert isinstance(in_ram.cache, PackedExperts) and in_ram.cache.n_expert == 3
    pairs = ((in_ram.host.gate, in_ram.cache.gate, resident.gate),
             (in_ram.host.up, in_ram.cache.up, resident.up),
             (in_ram.host.down, in_ram.cache.down, resident.down))  # fmt: skip
    for host, cache, on_device in pairs:
        assert host.packed.planes.keys() == on_device.packed.planes.keys()
        for name, plane in host.packed.planes.items():
            assert torch.equal(plane, on_device.packed.planes[name])
            assert torch.equal(cache.packed.planes[name], plane[: 3 * host.n_out])
    _, loads = in_ram.slots.assign([6, 1])
    assert loads == [(6, 0)]
    in_ram._copy(loads)
    for host, cache, _ in pairs:
        n = host.n_out
        for name, plane in host.packed.planes.items():
            assert torch.equal(cache.packed.planes[name][:n], plane[6 * n : 7 * n])
            assert torch.equal(cache.packed.planes[name][n : 2 * n], plane[n : 2 * n])
    assert in_ram.expert_nbytes == sum(w.expert_nbytes for w in (resident.gate, resident.up,
                                                                  resident.down))  # fmt: skip
    assert in_ram.bytes_copied == in_ram.expert_nbytes


def test_the_norm_writes_x_in_8_bits_for_the_experts(tmp_path):
    """The feed-forward norm counts the routed experts among the readers of its output, so it
    writes x in 8 bits in its own launch (a decode step's quantization launch fewer), and the
    expert GEMV reading that gives what it gives quantizing x itself."""
    config, _, experts = _layer_experts(tmp_path, "qwen3moe")
    x, logits = _routed(config, 2, seed=5)
    ops = KernelsOps("cpu")
    y, _, quantized = ops.rms_norm_for([experts], x, torch.ones(config.n_embd), 1e-6)
    assert quantized is not None and quantized.shape == tuple(y.shape)
    given = ops.moe_ffn(y, experts, logits, config.moe, quantized=quantized)
    alone = ops.moe_ffn(y, experts, logits, config.moe)
    torch.testing.assert_close(given, alone, rtol=1e-5, atol=1e-5)


class _CountedQuantization:
    """Counts kernels.act_quant.quantize_activation's launches (by every module that calls it)
    while installed."""

    def __init__(self, monkeypatch):
        import kernels.act_quant
        import kernels.gemv_dp4a
        import kernels.moe_gemv

        self.calls = 0
        quantize = kernels.act_quant.quantize_activation

        def counted(x, **kwargs):
            self.calls += 1
            return quantize(x, **kwargs)

        for module in (kernels.act_quant, kernels.gemv_dp4a, kernels.moe_gemv):
            monkeypatch.setattr(module, "quantize_activation", counted)


def _down_of_8_bit_h(monkeypatch):
    """expert_down as it was before it rounded h itself: h quantized by a launch of its own."""
    import kernels.act_quant
    import kernels.moe_gemv

    down = kernels.moe_gemv.expert_down

    def apart(h, w, routing, **kwargs):
        hq = kernels.act_quant.quantize_activation(h.reshape(-1, h.shape[-1]))
        return down(h, w, routing, quantized=hq, **kwargs)

    monkeypatch.setattr(kernels.moe_gemv, "expert_down", apart)


def _decode_step(path, patch=None, paged: bool = False) -> dict:
    """A 3-token prefill, then one decode step of a tiny model on KernelsOps, with
    `patch(monkeypatch)` applied: the step's logits ("logits"), the quantization launches the
    step took ("launches"), and over both forwards the expert ids of every expert_gate_up
    launch ("picks"), the matrices through KernelsOps.matmul ("matrices") and the launches of
    the 8-bit norm ("norms"). The counting passes every call on as it is: the same bits as
    without it."""
    import kernels.norms
    from engine.hearth.forward import Transformer
    from engine.hearth.kv_cache import TorchKVCache

    info = read_model_info(path)
    config = model_config(info)
    with pytest.MonkeyPatch.context() as monkeypatch:
        if patch is not None:
            patch(monkeypatch)
        picks = _recorded_routing(monkeypatch)
        matrices, norms = [], []
        matmul = KernelsOps.matmul
        norm = kernels.norms.rms_norm_quantized

        def counted(self, x, w, *args):
            matrices.append(getattr(getattr(w, "fmt", None), "name", None))
            return matmul(self, x, w, *args)

        def counted_norm(*args, **kwargs):
            norms.append(1)
            return norm(*args, **kwargs)

        monkeypatch.setattr(KernelsOps, "matmul", counted)
        monkeypatch.setattr(kernels.norms, "rms_norm_quantized", counted_norm)
        model = Transformer.load(config, GGUFTensors(str(path), info), KernelsOps("cpu"))
        dims = dict(n_layer=config.n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim)
        if paged:  # the decode kernels' cache, whose attention writes wo's input in 8 bits
            from engine.hearth.cache_layout import cache_layout
            from engine.hearth.caches import new_kv_cache

            layout = cache_layout("f16", "f16", kernels_on_gpu=True)
            cache = new_kv_cache(layout, **dims, n_ctx=16, device="cpu")
        else:
            cache = TorchKVCache(**dims, n_ctx=8, dtype=torch.float32)
        model.forward(torch.tensor([5, 17, 300]), torch.arange(3), cache, n_keys=3)
        quantizations = _CountedQuantization(monkeypatch)
        logits = model.forward(torch.tensor([42]), torch.tensor([3]), cache, n_keys=cache.n_ctx)
    return dict(logits=logits.numpy(), launches=quantizations.calls, picks=picks,
                matrices=matrices, norms=len(norms))  # fmt: skip


def _recorded_routing(monkeypatch) -> list:
    """The expert ids of every expert_gate_up launch, in order, while installed."""
    import kernels.moe_gemv

    seen = []
    gate_up = kernels.moe_gemv.expert_gate_up

    def recorded(x, gate, up, routing, *args, **kwargs):
        seen.append(routing.ids.clone())
        return gate_up(x, gate, up, routing, *args, **kwargs)

    monkeypatch.setattr(kernels.moe_gemv, "expert_gate_up", recorded)
    return seen


@pytest.fixture(scope="module")
def fused_step(tmp_path_factory):
    """arch -> (its tiny 2-layer model's file, _decode_step of it as KernelsOps runs it): one
    interpreter run an architecture, shared by the tests below that compare it with a step
    of one part of it taken apart (gpt-oss's step took 50 s in the interpreter, per test)."""
    runs = {}

    def run(arch: str):
        if arch not in runs:
            path = tmp_path_factory.mktemp(arch) / f"{arch}.gguf"
            write_tiny_gguf(path, tiny_spec(arch, n_layer=2))
            runs[arch] = path, _decode_step(path)
        return runs[arch]

    return run


@pytest.mark.parametrize("arch", ["qwen3moe", "gpt-oss"])
def test_the_down_projection_rounds_h_in_its_own_launch(arch, fused_step):
    """A decode step with the expert down rounding h to 8 bits in its own programs gives the
    logits of h quantized by a launch of its own, bit for bit, with one quantization launch
    fewer a layer (Q4_0 experts for qwen3moe, MXFP4 with biases for gpt-oss)."""
    path, fused = fused_step(arch)
    apart = _decode_step(path, _down_of_8_bit_h)
    np.testing.assert_array_equal(fused["logits"], apart["logits"])
    assert apart["launches"] - fused["launches"] == 2, (apart["launches"], fused["launches"])


def _router_apart(monkeypatch):
    """KernelsOps taking the FFN norm, the router's GEMV (ops.matmul), then select_and_route."""
    monkeypatch.setattr(KernelsOps, "norm_and_moe_ffn", TorchOps.norm_and_moe_ffn)
    monkeypatch.setattr(KernelsOps, "moe_ffn_from_router", TorchOps.moe_ffn_from_router)


@pytest.mark.parametrize("arch", ["qwen3moe", "gpt-oss"])
def test_the_norm_the_router_gemv_and_the_selection_take_one_launch(arch, fused_step):
    """A decode step with the FFN norm and the router's GEMV inside the routing launch
    (norm_and_route) against one with the norm, the GEMV and select_and_route apart: every
    layer picks the same experts, the logits agree to float32 sums in another order, and the
    fused step calls no norm launch and no matmul for the routers."""
    path, fused = fused_step(arch)
    apart = _decode_step(path, _router_apart)
    assert len(fused["picks"]) == len(apart["picks"]) > 0
    for a, b in zip(fused["picks"], apart["picks"], strict=True):
        assert torch.equal(a, b)
    scale = np.abs(apart["logits"]).max()
    np.testing.assert_allclose(fused["logits"], apart["logits"], rtol=1e-4, atol=1e-4 * scale)
    # 2 layers x 2 forwards (the prefill and the decode step): the routers' GEMVs, the norms
    fused_gemvs, apart_gemvs = fused["matrices"], apart["matrices"]
    assert len(apart_gemvs) - len(fused_gemvs) == 4, (apart_gemvs, fused_gemvs)
    assert apart["norms"] - fused["norms"] == 4, (apart["norms"], fused["norms"])


def _router_launch(monkeypatch):
    """KernelsOps routing a one-token step from the norm's output (norm_and_route), not beside
    wo."""
    monkeypatch.setattr(KernelsOps, "scores_beside_wo", False)


@pytest.mark.slow
def test_a_one_token_step_routes_beside_wo(tmp_path, monkeypatch):
    """qwen3moe with Q4_K attention matrices (the integer GEMV's wo), on the paged cache (its
    attention writes wo's input in 8 bits) and on the plain one (quantized for the scores): at
    load the layer folds its router; the decode step computes the scores before wo, the picks
    in wo's launch and their weights in the norm's, and it picks what norm_and_route picks,
    its logits within the float16 folding's rounding of that step's; the prefill (3 tokens)
    routes as before."""
    from gguf import GGMLQuantizationType as QT

    spec = tiny_spec(
        "qwen3moe", n_layer=1, n_embd=256, head_dim=64, matrix_type=QT.Q4_K, wo_type=QT.Q4_K
    )
    path = write_tiny_gguf(tmp_path / "q.gguf", spec)
    calls = []
    scores = KernelsOps.matmul_and_scores

    def counted(self, *args):
        calls.append(1)
        return scores(self, *args)

    monkeypatch.setattr(KernelsOps, "matmul_and_scores", counted)
    for paged in (True, False):
        calls.clear()
        beside = _decode_step(path, paged=paged)
        assert len(calls) == 1  # the decode step's one layer
        apart = _decode_step(path, _router_launch, paged=paged)
        assert len(calls) == 1 and len(beside["picks"]) == len(apart["picks"]) == 2
        for a, b in zip(beside["picks"], apart["picks"], strict=True):
            assert torch.equal(a.cpu(), b.cpu())
        scale = np.abs(apart["logits"]).max()
        np.testing.assert_allclose(beside["logits"], apart["logits"], rtol=0, atol=2e-3 * scale)
        assert not np.array_equal(beside["logits"], apart["logits"])  # another path was taken


def test_layers_that_cannot_route_beside_wo_keep_the_router(tmp_path):
    """The tiny qwen3moe's F16 wo has no integer GEMV to compute scores beside, and
    gpt-oss's router has a bias: neither folds; TorchOps never does."""
    from engine.hearth.forward import Transformer

    for arch in ("qwen3moe", "gpt-oss"):
        path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=1))
        info = read_model_info(path)
        config = model_config(info)
        for ops in (KernelsOps("cpu"), TorchOps("cpu")):
            model = Transformer.load(config, GGUFTensors(str(path), info), ops)
            assert model.layers[0].moe.folded is None, (arch, ops.name)
