"""The CPU experts (engine/hearth/cpu_experts.py): ggml's kernels over a GGUF's mapped expert
tensors against kernels/moe_reference.py's float64 sum, on Qwen3-like (Q4_K gate and up, Q6_K
down, silu) and gpt-oss-like (MXFP4, expert biases, swiglu_oai, widths of whole 32-blocks only)
small shapes, as mapped and repacked; the refusals that keep ggml from aborting the process;
and the ops seam (ops.prepare_experts_on_cpu, ExpertPlacement(on_cpu=True)) in a tiny model.

Tolerances. ggml's CPU mul_mat rounds its float input to the weights' dot-product partner
format before multiplying (as llama.cpp does); the weights' own rounding is in the reference
too (it dequantizes the same blocks), so only the input's differs. Rounding to 8 bits with a
scale of amax/127 per block errs by about amax / 127 / sqrt(12) per element: for Gaussian
input (amax about 3 sigma in a 256-block of q8_K, 2 sigma in a 32-block of q8_0) 0.7% and
0.5% of sigma, and a random dot product inherits that relative error. The down projection's
input h = act(g, u) is rounded again, with heavier tails (amax 5-8 sigma): 1-2%. So the
result's norm-relative error is about 1.5-2%; the bounds are about twice that. F16 input
rounds to 11 bits (0.03%), BF16 to 8 (0.2%), F32 not at all: there the sum is checked to
float32 accumulation (1e-5), which pins down the graph's wiring (ids, weights, biases, the
activation) exactly. A wrong expert, weight or activation errs by order 1.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.gguf.ggml_types import GGML_TYPES_BY_NAME
from engine.hearth.cpu_experts import CpuExperts, ExpertTensor, gguf_experts
from engine.hearth.ggml_cpu import GgmlCpu, GgmlUnavailable, _Ggml
from kernels.availability import interpret_mode
from kernels.moe_reference import dequantize_experts, moe
from testkit.synthetic_gguf import SHAPES
from testkit.synthetic_moe import write_experts_gguf

# KernelsOps on the CPU runs its kernels in Triton's interpreter, which a GPU host's test run
# does not use (tests/conftest.py sets it only without an NVIDIA GPU): those tests run in CI
ON_THE_CPU_ONLY = pytest.mark.skipif(
    not interpret_mode(), reason="KernelsOps on the CPU needs Triton's interpreter"
)

QWEN3_LIKE = replace(SHAPES["qwen3-30b-a3b"], n_expert=8, n_embd=512, n_ff_exp=256)
GPT_OSS_LIKE = replace(SHAPES["gpt-oss-20b"], n_expert=8, n_embd=288, n_ff_exp=160)

# the input's rounding (partner format of the weights) -> norm-relative bound (module docstring)
TOLERANCE = {"F32": 1e-5, "F16": 2e-3, "BF16": 1e-2, "q8_0": 4e-2, "q8_K": 4e-2}
PARTNER = {"F32": "F32", "F16": "F16", "BF16": "BF16", "Q4_K": "q8_K", "Q5_K": "q8_K",
           "Q6_K": "q8_K"}  # fmt: skip


INPUT_SCALE = 0.02


@pytest.fixture(scope="module")
def cpu():
    made = GgmlCpu(n_threads=1)
    yield made
    made.close()


def layer_file(tmp_path, shape, types, biases=False):
    path = tmp_path / "experts.gguf"
    write_experts_gguf(path, shape, 2, types, biases=biases, seed=3)
    return path


def reference(gate, up, down, biases, x, ids, weights, activation):
    dense = [
        dequantize_experts(np.asarray(t.owner), t.type_name, (t.n_expert, t.n_out, t.n_in))
        for t in (gate, up, down)
    ]
    return moe(x, *dense, ids, weights, activation, biases)


def routing(n_tokens, n_expert, k, seed):
    """Distinct experts per token (as a top-k picks them) and positive weights."""
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.choice(n_expert, k, replace=False) for _ in range(n_tokens)])
    return ids, rng.random((n_tokens, k)).astype(np.float32)


def relative_error(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


CASES = [
    # (shape, types gate/up/down, activation, biases)
    (QWEN3_LIKE, ("Q4_K", "Q4_K", "Q6_K"), "silu", False),
    (GPT_OSS_LIKE, ("MXFP4", "MXFP4", "MXFP4"), "swiglu_oai", True),
    (QWEN3_LIKE, ("F32", "F32", "F32"), "silu", False),
    (GPT_OSS_LIKE, ("F32", "F32", "F32"), "swiglu_oai", True),
    (QWEN3_LIKE, ("F16", "BF16", "F16"), "silu", False),
    (QWEN3_LIKE, ("Q5_K", "Q8_0", "Q4_0"), "silu", False),
    (GPT_OSS_LIKE, ("Q4_1", "Q5_0", "Q5_1"), "swiglu_oai", False),
]


@pytest.mark.parametrize("n_tokens", [1, 5])
@pytest.mark.parametrize(("shape", "types", "activation", "biases"), CASES,
                         ids=["-".join(c[1]) + "-" + c[2] for c in CASES])  # fmt: skip
def test_matches_the_reference(tmp_path, cpu, shape, types, activation, biases, n_tokens):
    path = layer_file(tmp_path, shape, dict(zip(("gate", "up", "down"), types, strict=True)),
                      biases)  # fmt: skip
    gate, up, down, layer_biases = gguf_experts(path, 1)
    assert (layer_biases[0] is not None) == biases
    experts = CpuExperts(gate, up, down, layer_biases, activation=activation, cpu=cpu)
    rng = np.random.default_rng(n_tokens)
    # small inputs: the random blocks' gate outputs then fall where silu bends
    x = (rng.standard_normal((n_tokens, shape.n_embd)) * INPUT_SCALE).astype(np.float32)
    ids, weights = routing(n_tokens, shape.n_expert, 4, seed=n_tokens)
    got = experts.run(x, ids, weights)
    want = reference(gate, up, down, layer_biases, x, ids, weights, activation)
    assert got.shape == (n_tokens, shape.n_embd) and got.dtype == np.float32
    bound = max(TOLERANCE[PARTNER.get(t, "q8_0")] for t in types)
    assert relative_error(got, want) < bound


@pytest.mark.parametrize(
    ("shape", "types", "activation", "biases"),
    [
        (QWEN3_LIKE, ("Q4_K", "Q4_K", "Q6_K"), "silu", False),
        (QWEN3_LIKE, ("Q4_0", "Q8_0", "Q4_0"), "silu", False),
        (GPT_OSS_LIKE, ("MXFP4", "MXFP4", "MXFP4"), "swiglu_oai", True),
    ],
)
def test_repacked_experts_give_the_same_sums(tmp_path, cpu, shape, types, activation, biases):
    """repack=True: the matrices ggml's CPU runs repacked (on x86 with AVX2: Q4_K as
    q4_K_8x8, Q4_0 and MXFP4 too; Q6_K and Q8_0 stay as mapped) give the sums of the blocks
    as stored, to float32 rounding (the same integer dot products, summed in another order)."""
    path = layer_file(tmp_path, shape, dict(zip(("gate", "up", "down"), types, strict=True)),
                      biases)  # fmt: skip
    layer = gguf_experts(path, 1)
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, shape.n_embd)) * INPUT_SCALE).astype(np.float32)
    ids, weights = routing(3, shape.n_expert, 4, seed=9)
    plain = CpuExperts(*layer, activation=activation, cpu=cpu)
    repacked = CpuExperts(*layer, activation=activation, cpu=cpu, repack=True)
    assert plain.repacked == (False, False, False)
    assert plain._gate_up is None
    if repacked._gate_up is not None:  # merged only where ggml_swiglu computes the same
        assert types[0] == types[1] and activation == "silu" and not biases
    got = repacked.run(x, ids, weights)
    assert relative_error(got, plain.run(x, ids, weights)) < 1e-5
    want = reference(*layer, x, ids, weights, activation)
    assert relative_error(got, want) < TOLERANCE["q8_K"]


def test_gate_and_up_merged_give_the_bits_of_each_apart(tmp_path, cpu, monkeypatch):
    """Gate and up as one repacked tensor under ggml_swiglu: the same row dot products and
    activation as two tensors under ggml_swiglu_split, so the same bits, one token or many."""
    types = {"gate": "Q4_K", "up": "Q4_K", "down": "Q6_K"}
    layer = gguf_experts(layer_file(tmp_path, QWEN3_LIKE, types, False), 1)
    merged = CpuExperts(*layer, activation="silu", cpu=cpu, repack=True)
    if merged._gate_up is None:
        pytest.skip("ggml's CPU has no repacked layout for Q4_K here")
    assert merged.repacked[:2] == (True, True) and merged._weights[:2] == [None, None]
    monkeypatch.setattr(CpuExperts, "_merges_gate_up", lambda self: False)
    apart = CpuExperts(*layer, activation="silu", cpu=cpu, repack=True)
    assert apart._gate_up is None and apart.repacked[:2] == (True, True)
    rng = np.random.default_rng(4)
    for n_tokens in (1, 5):
        x = (rng.standard_normal((n_tokens, QWEN3_LIKE.n_embd)) * INPUT_SCALE).astype(np.float32)
        ids, weights = routing(n_tokens, QWEN3_LIKE.n_expert, 4, seed=n_tokens)
        np.testing.assert_array_equal(merged.run(x, ids, weights), apart.run(x, ids, weights))


def test_another_layer_of_the_file_gives_another_answer(tmp_path, cpu):
    """gguf_experts finds the asked layer's bytes: layer 0's experts are other random
    blocks, so the reference for layer 1 does not fit them."""
    path = layer_file(tmp_path, QWEN3_LIKE, {"gate": "F32", "up": "F32", "down": "F32"})
    x = np.random.default_rng(0).standard_normal((2, QWEN3_LIKE.n_embd)).astype(np.float32)
    ids, weights = routing(2, QWEN3_LIKE.n_expert, 4, seed=1)
    layers = [gguf_experts(path, i) for i in (0, 1)]
    got0 = CpuExperts(*layers[0], activation="silu", cpu=cpu).run(x, ids, weights)
    want1 = reference(*layers[1], x, ids, weights, "silu")
    assert relative_error(got0, want1) > 0.5
    assert relative_error(got0, reference(*layers[0], x, ids, weights, "silu")) < 1e-5


def test_threads_and_kept_graphs_give_the_same_sums(tmp_path, cpu):
    """ggml splits rows among threads, each row summed by one: 2 threads give 1 thread's
    bits; a graph kept for a token count and built again after being dropped too."""
    path = layer_file(tmp_path, QWEN3_LIKE, {"gate": "Q4_K", "up": "Q4_K", "down": "Q6_K"})
    layer = gguf_experts(path, 0)
    one = CpuExperts(*layer, activation="silu", cpu=cpu)
    two_cpu = GgmlCpu(n_threads=2)
    two = CpuExperts(*layer, activation="silu", cpu=two_cpu)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, QWEN3_LIKE.n_embd)).astype(np.float32)
    ids, weights = routing(3, QWEN3_LIKE.n_expert, 4, seed=7)
    first = one.run(x, ids, weights)
    np.testing.assert_array_equal(two.run(x, ids, weights), first)
    for n in (1, 2, 4, 5, 6):  # more token counts than graphs kept: the first is dropped
        one.run(x[:1].repeat(n, 0), ids[:1].repeat(n, 0), weights[:1].repeat(n, 0))
    assert (3, 4) not in one._graphs
    np.testing.assert_array_equal(one.run(x, ids, weights), first)
    two.close()
    two_cpu.close()


def test_layers_sharing_a_pool_can_be_called_from_threads(tmp_path, cpu):
    """Two layers on one GgmlCpu called from two threads at once (as a GPU step's worker
    thread would beside the main one): each call gets its own layer's answer, as alone."""
    from concurrent.futures import ThreadPoolExecutor

    path = layer_file(tmp_path, QWEN3_LIKE, {"gate": "Q4_K", "up": "Q4_K", "down": "Q6_K"})
    layers = [CpuExperts(*gguf_experts(path, i), activation="silu", cpu=cpu) for i in (0, 1)]
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, QWEN3_LIKE.n_embd)) * INPUT_SCALE).astype(np.float32)
    ids, weights = routing(2, QWEN3_LIKE.n_expert, 4, seed=11)
    alone = [layer.run(x, ids, weights) for layer in layers]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(lambda i=i: [layers[i].run(x, ids, weights) for _ in range(30)])
                   for i in (0, 1)]  # fmt: skip
        results = [f.result() for f in futures]
    for i in (0, 1):
        for got in results[i]:
            np.testing.assert_array_equal(got, alone[i])


def _threads() -> int:
    import os

    return len(os.listdir("/proc/self/task"))


def test_releasing_the_callers_openmp_team_frees_its_threads(q4k_layer_path):
    """ggml computes with libgomp here, a team of threads kept per calling thread:
    release_openmp_threads (what the decode step calls before its host nodes run ggml on the
    driver's thread) ends this thread's team's threads, and the next compute makes them again
    and gives the same sums."""
    import time

    from engine.hearth.ggml_cpu import release_openmp_threads

    three = GgmlCpu(n_threads=3)
    layer = CpuExperts(*gguf_experts(q4k_layer_path, 0), activation="silu", cpu=three)
    x = np.full((1, QWEN3_LIKE.n_embd), INPUT_SCALE, np.float32)
    ids, weights = routing(1, QWEN3_LIKE.n_expert, 4, seed=5)
    first = layer.run(x, ids, weights)  # this thread's team: at least 2 threads besides it
    with_team = _threads()
    if not release_openmp_threads():
        layer.close()
        three.close()
        pytest.skip("this ggml computes without libgomp")
    deadline = time.monotonic() + 5
    while _threads() > with_team - 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # the freed threads exit on their own
    assert _threads() <= with_team - 2
    np.testing.assert_array_equal(layer.run(x, ids, weights), first)
    assert _threads() >= with_team  # made again
    layer.close()
    three.close()


@pytest.fixture(scope="module")
def q4k_layer_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("q4k") / "experts.gguf"
    return write_experts_gguf(path, QWEN3_LIKE, 1, {"gate": "Q4_K", "up": "Q4_K", "down": "Q6_K"})


@pytest.fixture(scope="module")
def q4k_layer(q4k_layer_path):
    return gguf_experts(q4k_layer_path, 0)


def test_each_repacked_buffer_is_asked_for_huge_pages_before_it_is_filled_and_collapsed_after(
    q4k_layer, cpu, monkeypatch
):
    """The range asked for holds the repacked tensor's bytes, and is asked for before the
    repack writes them (the pages are made at the first write); the same range is collapsed
    onto huge pages after them (for the pages those writes did not get huge)."""
    from engine.hearth import cpu_experts
    from engine.hearth.ggml_cpu import ggml

    lib, asked, written, collapsed = ggml(), [], [], []
    set_tensor = lib.backend_tensor_set

    def ask(address, nbytes):
        asked.append((address, nbytes, len(written)))

    def collapse(address, nbytes):
        collapsed.append((address, nbytes, len(written)))

    def write(tensor, *args):
        written.append(tensor)
        set_tensor(tensor, *args)

    monkeypatch.setattr(cpu_experts, "prefer_huge_pages", ask)
    monkeypatch.setattr(cpu_experts, "collapse_to_huge_pages", collapse)
    monkeypatch.setattr(lib, "backend_tensor_set", write)
    gate, up, down, biases = q4k_layer
    layer = CpuExperts(gate, up, down, biases, activation="silu", cpu=cpu, repack=True)
    # gate and up as one tensor (where merged), then each other matrix ggml runs repacked
    own = [t for t, r in zip(layer._weights, layer.repacked, strict=True) if r and t is not None]
    repacked = [t for t in (layer._gate_up, *own) if t is not None]
    assert repacked and len(asked) == len(repacked) == len(written)
    for n, (tensor, (address, nbytes, writes_before)) in enumerate(
        zip(repacked, asked, strict=True)
    ):
        data = lib.get_data(tensor)
        assert address <= data and data + lib.nbytes(tensor) <= address + nbytes
        assert writes_before == n  # this tensor's bytes not yet written
    # the same ranges collapsed onto huge pages once each is written
    assert collapsed == [(address, nbytes, n + 1) for n, (address, nbytes, _) in enumerate(asked)]
    layer.close()


def test_a_format_without_a_cpu_path_is_refused(q4k_layer, cpu):
    gate, up, down, biases = q4k_layer
    iq4 = replace(gate, ggml_type=GGML_TYPES_BY_NAME["IQ4_XS"].id, name="blk.0.ffn_gate_exps")
    with pytest.raises(ValueError, match="IQ4_XS experts have no CPU path"):
        CpuExperts(iq4, up, down, biases, activation="silu", cpu=cpu)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g, u, d: (replace(g, n_in=g.n_in - 32), u, d), "not whole 256-blocks"),
        (lambda g, u, d: (replace(g, address=g.address + 16), u, d), "aligned"),
        (lambda g, u, d: (g, u, replace(d, n_out=d.n_out // 2)), "do not chain"),
    ],
)
def test_what_ggml_would_abort_on_is_refused(q4k_layer, cpu, change, message):
    gate, up, down, biases = q4k_layer
    with pytest.raises(ValueError, match=message):
        CpuExperts(*change(gate, up, down), biases, activation="silu", cpu=cpu)


def test_bad_calls_are_refused(q4k_layer, cpu):
    experts = CpuExperts(*q4k_layer, activation="silu", cpu=cpu)
    x = np.zeros((1, QWEN3_LIKE.n_embd), np.float32)
    weights = np.ones((1, 2), np.float32)
    with pytest.raises(ValueError, match="expert ids outside"):
        experts.run(x, np.array([[0, QWEN3_LIKE.n_expert]]), weights)
    with pytest.raises(ValueError, match="expected"):
        experts.run(x[:, :-1], np.array([[0, 1]]), weights)
    with pytest.raises(ValueError, match="activation 'gelu'"):
        CpuExperts(*q4k_layer, activation="gelu", cpu=cpu)


def test_array_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="bytes"):
        ExpertTensor.of_array("w", 0, (2, 4, 8), np.zeros(100, np.uint8))


def test_a_folder_without_ggml_says_so(tmp_path):
    with pytest.raises(GgmlUnavailable, match="could not be loaded"):
        _Ggml(tmp_path)


# The ops seam: ops.prepare_experts_on_cpu and ExpertPlacement(on_cpu=True) in a whole model.

TOKENS = [1, 5, 9, 2, 77, 31, 8, 100, 3, 64]


def model_logits(path, placement):
    """Every position's logits on TorchOps (the CPU): a 6-token prefill, then decode steps."""
    from tests.engine.hearth.tiny_models import placement_logits

    return placement_logits(path, placement, TOKENS, prefill=6)


@pytest.mark.parametrize(
    ("arch", "expert_type", "bound"),
    [
        # the experts' rounding of x (module docstring) errs by a share of their output, which
        # is a share of the residual stream the logits read: measured 1e-4 (F16: x to f16),
        # 3.2e-3 (Q4_0) and 4.7e-3 (MXFP4 with biases and swiglu_oai: x to q8_0)
        ("qwen3moe", "F16", 5e-4),
        ("qwen3moe", "Q4_0", 1e-2),
        ("gpt-oss", "MXFP4", 1e-2),
    ],
)
def test_experts_on_the_cpu_give_the_logits_of_experts_on_the_device(
    tmp_path, arch, expert_type, bound
):
    """The last layer's experts computed by ggml from the mapped file, the first layer's on
    the (CPU) device: the logits of the model with every expert on the device, through the
    host function's buffers (the 6-token prefill and each decode step: the path a CUDA graph
    captures), and the model's steps can be captured (no routing read back)."""
    from gguf import GGMLQuantizationType

    from engine.hearth.expert_offload import ExpertPlacement, ExpertsOnCpu
    from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

    spec = tiny_spec(arch, expert_type=GGMLQuantizationType[expert_type])
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", spec)
    expected, _ = model_logits(path, ExpertPlacement())
    placement = ExpertPlacement(ram_layers=1, on_cpu=True, cpu_threads=1)
    got, model = model_logits(path, placement)
    assert isinstance(model.layers[1].moe.experts, ExpertsOnCpu)
    assert not isinstance(model.layers[0].moe.experts, ExpertsOnCpu)
    assert not model.routes_on_host
    assert relative_error(got, expected) < bound


def _torch_layer(path):
    """Layer 0 of an experts-only file on TorchOps: ExpertsOnCpu."""
    from engine.gguf import read_model_info
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

    tensors = GGUFTensors(str(path), read_model_info(path))
    parts = [tensors.experts(f"blk.0.ffn_{r}_exps.weight") for r in ("gate", "up", "down")]
    return TorchOps("cpu").prepare_experts_on_cpu(*parts, "silu", n_threads=1)


def test_long_and_short_steps_of_cpu_experts_give_the_same_sums(q4k_layer_path):
    """A step of more than HOST_CALL_MAX_TOKENS tokens (a prefill chunk: the inputs read back,
    ggml waited for) and the same tokens one a step through the host function's buffers:
    CpuExperts.run's sums of the same rows, bit for bit."""
    import torch

    from engine.hearth.expert_offload import HOST_CALL_MAX_TOKENS

    rng = np.random.default_rng(5)
    n = HOST_CALL_MAX_TOKENS + 4
    x = torch.from_numpy(rng.standard_normal((n, QWEN3_LIKE.n_embd)).astype(np.float32) * 0.02)
    ids = torch.from_numpy(np.stack([rng.permutation(8)[:4] for _ in range(n)]))
    weights = torch.from_numpy(rng.random((n, 4)).astype(np.float32))
    layer = _torch_layer(q4k_layer_path)
    want = layer.experts.run(x.numpy(), ids.numpy(), weights.numpy())
    long = layer.run(x, ids, weights)
    np.testing.assert_array_equal(long.numpy(), want)
    short = [layer.run(x[i : i + 1], ids[i : i + 1], weights[i : i + 1]) for i in range(n)]
    # one token a call: each CpuExperts.run's of that token (ggml's kernels for one row sum
    # in another order than for twenty: 4e-4 of 280 apart, so the many-row sums are not it)
    for i, row in enumerate(short):
        alone = layer.experts.run(x[i : i + 1].numpy(), ids[i : i + 1].numpy(),
                                  weights[i : i + 1].numpy())  # fmt: skip
        np.testing.assert_array_equal(row.numpy(), alone)


def test_a_failing_host_function_leaves_nan_and_its_error(q4k_layer_path, monkeypatch):
    """A host node cannot raise into the step: a failure in ggml's call is kept (errors())
    and the sum is NaN, which the logits then show."""
    import torch

    layer = _torch_layer(q4k_layer_path)

    def fails(*args):
        raise RuntimeError("ggml_backend_graph_compute failed (status 1)")

    monkeypatch.setattr(layer.experts, "run_at", fails)
    x = torch.full((1, QWEN3_LIKE.n_embd), 0.01)
    out = layer.run(x, torch.tensor([[0, 1, 2, 3]]), torch.full((1, 4), 0.25))
    assert torch.isnan(out).all()
    assert [str(e) for e in layer.errors()] == ["ggml_backend_graph_compute failed (status 1)"]


def test_experts_on_the_cpu_take_no_cache():
    from engine.hearth.expert_offload import ExpertPlacement

    with pytest.raises(ValueError, match="no device cache"):
        ExpertPlacement(ram_layers=1, cache_slots=4, on_cpu=True).check(8, 2)


@ON_THE_CPU_ONLY
def test_kernels_ops_hand_experts_on_the_cpu_to_them(q4k_layer_path):
    """KernelsOps' moe_ffn (Triton's interpreter here) gives experts on the CPU to the CPU,
    as TorchOps does: the same sums from the same router logits, and those of CpuExperts
    itself (repacked, as the seam makes them) for the experts the router picks."""
    import torch

    from engine.gguf import read_model_info
    from engine.hearth.config import MoeConfig
    from engine.hearth.ops import KernelsOps, TorchOps
    from engine.hearth.routing import select_experts
    from engine.hearth.weights import GGUFTensors

    tensors = GGUFTensors(str(q4k_layer_path), read_model_info(q4k_layer_path))
    parts = [tensors.experts(f"blk.0.ffn_{r}_exps.weight") for r in ("gate", "up", "down")]
    rule = MoeConfig(n_expert=8, n_expert_used=4, n_ff_exp=QWEN3_LIKE.n_ff_exp,
                     gating="softmax", normalize=True)  # fmt: skip
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal((3, QWEN3_LIKE.n_embd)).astype(np.float32) * 0.02)
    logits = torch.from_numpy(rng.standard_normal((3, 8)).astype(np.float32))
    outputs = []
    for ops in (TorchOps("cpu"), KernelsOps("cpu")):
        experts = ops.prepare_experts_on_cpu(*parts, "silu", n_threads=1)
        outputs.append(ops.moe_ffn(x, experts, logits, rule).numpy())
        # the norm before them: x as it is (ggml's kernels take no 8-bit x of ours)
        _, _, shared = ops.rms_norm_for([experts], x, torch.ones(QWEN3_LIKE.n_embd), 1e-6)
        assert shared is None
    ids, weights = select_experts(logits, 4, gating="softmax", normalize=True)
    direct = CpuExperts(
        *gguf_experts(q4k_layer_path, 0), activation="silu", cpu=GgmlCpu(1), repack=True
    )
    want = direct.run(x.numpy(), ids.numpy(), weights.numpy())
    np.testing.assert_array_equal(outputs[0], want)
    np.testing.assert_array_equal(outputs[1], want)
