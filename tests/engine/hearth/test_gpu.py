"""The Hearth engine on a GPU (HEARTH_GPU_TESTS=1 on the device machine).

- Every architecture of the tiny models against the float64 reference on kernels/ (prefill
  through the device dequantizer and torch's GEMM, decode through the GEMV), and the decode
  step's CUDA graph against the same steps run eagerly.
- The starter model (SmolLM2-135M-Instruct Q4_1), greedy, against llama.cpp's CPU build by
  the near-tie rule of engine/runtime/greedy_check.py. The GPU machine has no CPU build, so the
  reference is the one recorded on the CI machine (tests/engine/runtime/data/cpu_reference.json,
  the same file the CUDA build of llama.cpp is judged against); HEARTH_GPU_STARTER_MODEL names
  the model file, whose SHA-256 must be the recorded one. The Hearth engine still loads
  llama.cpp for its vocabulary, so this one needs the llama.cpp build there too.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import KernelsOps
from engine.hearth.reference import reference_logits
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth import test_forward
from tests.engine.hearth.tiny_models import write_tiny_gguf

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)

REFERENCE = Path(__file__).resolve().parents[1] / "runtime" / "data" / "cpu_reference.json"


def load(path, paged: bool = False) -> tuple[Transformer, TorchKVCache]:
    """The model on kernels/, and the plain f16 cache or kernels' paged f16 one (the worker's
    cache on a GPU)."""
    from engine.hearth.paged_cache import PagedCacheAdapter

    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), KernelsOps("cuda"))
    dims = dict(
        n_layer=config.n_layer,
        n_head_kv=config.n_head_kv,
        head_dim=config.head_dim,
        n_ctx=test_forward.N_CTX,
        device="cuda",
    )
    if paged:
        if config.head_dim < 32:  # kernels' paged cache takes heads of 32 to 256 values
            pytest.skip(f"head size {config.head_dim}: the paged cache needs 32 or more")
        return model, PagedCacheAdapter(**dims, k_format="f16", v_format="f16")
    return model, TorchKVCache(**dims)


@pytest.mark.parametrize("paged", [False, True], ids=["plain", "paged"])
@pytest.mark.parametrize("arch", list(test_forward.CASES))
def test_every_architecture_matches_the_reference_on_the_gpu(arch, paged, tmp_path):
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", test_forward.CASES[arch])
    info = read_model_info(path)
    expected = reference_logits(
        model_config(info), GGUFTensors(str(path), info), test_forward.TOKENS
    )
    # 17 prefill rows exceed the GEMV's 16: the chunk goes through the device dequantizer
    model, cache = load(path, paged)
    n = len(test_forward.TOKENS)
    got = model.forward(
        torch.tensor(test_forward.TOKENS, device="cuda"),
        torch.arange(n, device="cuda"),
        cache,
        n_keys=n,
        all_logits=True,
    )
    scale = max(1.0, np.abs(expected).max())
    # f16 operands in the GEMM and the cache: llama.cpp's CUDA build rounds the same way
    np.testing.assert_allclose(got.float().cpu().numpy(), expected, atol=2e-2 * scale)


def _prefilled(path, n: int, paged: bool = False):
    model, cache = load(path, paged)
    model.forward(
        torch.tensor(test_forward.TOKENS[:n], device="cuda"),
        torch.arange(n, device="cuda"),
        cache,
        n_keys=n,
    )
    return model, cache


def _eager_step(model, cache, token: int, position: int) -> torch.Tensor:
    return model.forward(
        torch.tensor([token], device="cuda"),
        torch.tensor([position], device="cuda"),
        cache,
        n_keys=cache.n_ctx,
    )


@pytest.mark.parametrize("paged", [False, True], ids=["plain", "paged"])
@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen3moe", "gpt-oss-mxfp4-sinks-yarn-swa"])
def test_the_graph_replays_what_eager_decode_computes(arch, paged, tmp_path):
    """Given tokens (as a sampler would choose them), graph steps give eager steps' logits;
    gemma3: a tied output matrix as the device embedding table, sliding-window layers; the MoE
    models: the router, route_experts and the expert GEMV captured (other experts picked at
    each replay)."""
    from engine.hearth.decode_graph import DecodeGraph

    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", test_forward.CASES[arch])
    model, eager_cache = _prefilled(path, 4, paged)
    _, graph_cache = _prefilled(path, 4, paged)
    graph = DecodeGraph(model, graph_cache, position=4)
    for pos in range(4, len(test_forward.TOKENS)):
        token = test_forward.TOKENS[pos]
        expected = _eager_step(model, eager_cache, token, pos)
        got, greedy = graph.step(token, pos, launch_ahead=False)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-3)
        assert greedy == int(torch.argmax(expected))


@pytest.mark.parametrize(
    "arch, kv",
    [("llama", "plain"), ("llama", "f16"), ("llama", "q8/rot4"), ("llama", "kivi4/f16"),
     ("qwen3moe", "plain"), ("gpt-oss-mxfp4-sinks-yarn-swa", "plain")],
)  # fmt: skip
def test_prefill_graphs_replay_what_eager_chunks_compute(arch, kv, tmp_path):
    """A prompt of 100 + 100 + 90 tokens, each chunk run as 128 rows (past
    MOE_GEMM_MIN_TOKENS: the grouped GEMM and its routing captured): the first eagerly, the
    second captured and replayed, the third (partial: 38 padding rows) replayed from the same
    graph at other positions; then decode steps from the decode graph, which overwrite the
    padding rows' slots. Each chunk's logits and each step's as on a cache prefilled and
    decoded eagerly, chunk by chunk (to 1e-2: the GEMMs at 128 rows where eagerly 100 or 90
    may take other tiles and round f16 outputs otherwise; a padding row or slot seen moves
    logits by ~1e-1). Paged caches: f16, q8 keys with rot4 values, kivi4 keys (no padding
    across a page's end: three chunks of 100 rows)."""
    from engine.hearth.decode_graph import DecodeGraph
    from engine.hearth.paged_cache import PagedCacheAdapter
    from engine.hearth.prefill_graph import PrefillGraphs

    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", test_forward.CASES[arch])
    model, _ = load(path)
    config = model.config
    n_ctx = 400
    dims = dict(n_layer=config.n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim,
                n_ctx=n_ctx, device="cuda")  # fmt: skip

    def cache():
        if kv == "plain":
            return TorchKVCache(**dims)
        k_format, _, v_format = kv.partition("/")
        return PagedCacheAdapter(**dims, k_format=k_format, v_format=v_format or k_format)

    eager_cache, graph_cache = cache(), cache()
    graphs = PrefillGraphs(model, graph_cache)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config.n_vocab, (300,), generator=generator)
    kivi = kv == "kivi4/f16"  # unpadded: a third chunk of 100 rows replays the second's graph
    last = 300 if kivi else 290
    for start, end in ((0, 100), (100, 200), (200, last)):
        ids = tokens[start:end].cuda()
        positions = torch.arange(start, end, device="cuda")
        expected = model.forward(ids, positions, eager_cache, n_keys=end)
        got = graphs.forward(ids, start)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-2)
    assert set(graphs._graphs) == {(100 if kivi else 128, n_ctx)}, graphs.failures
    step = DecodeGraph(model, graph_cache, position=last)  # the worker's decode after a prompt
    for pos in range(last, last + 4):
        expected = _eager_step(model, eager_cache, pos % config.n_vocab, pos)
        got, _ = step.step(pos % config.n_vocab, pos, launch_ahead=False)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-2)


def test_a_chunk_whose_capture_fails_runs_eagerly_and_other_shapes_still_replay(tmp_path):
    """A chunk shape whose forward reads a value back to the host (as an operator that syncs
    would) cannot be captured: its chunks run eagerly with their right logits, the reason is
    kept, and a chunk of another shape is captured and replayed after it (the failed capture
    left the stream and the graphs' pool as they were)."""
    from engine.hearth.prefill_graph import PrefillGraphs

    path = write_tiny_gguf(tmp_path / "llama.gguf", test_forward.CASES["llama"])
    model, _ = load(path)
    config = model.config
    dims = dict(n_layer=config.n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim,
                n_ctx=128, device="cuda")  # fmt: skip
    graph_cache, eager_cache = TorchKVCache(**dims), TorchKVCache(**dims)
    graphs = PrefillGraphs(model, graph_cache)
    ids = torch.arange(1, 33, device="cuda") % config.n_vocab
    original = model.forward_embedded

    def reading_back(h, *args, **kwargs):
        if h.shape[0] == 32:
            float(h.sum())  # a host read: no capture holds it
        return original(h, *args, **kwargs)

    model.forward_embedded = reading_back
    try:
        for _ in range(3):
            got = graphs.forward(ids, 0)
    finally:
        del model.forward_embedded
    assert (32, 128) in graphs.failures and not graphs._graphs
    expected = model.forward(ids, torch.arange(32, device="cuda"), eager_cache, n_keys=32)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-2)
    for start in (32, 48, 64):  # 16 rows: eager, captured, replayed
        got = graphs.forward(ids[:16], start)
        positions = torch.arange(start, start + 16, device="cuda")
        expected = model.forward(ids[:16], positions, eager_cache, n_keys=start + 16)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-2)
    assert set(graphs._graphs) == {(16, 128)}, graphs.failures


def test_launching_ahead_gives_the_same_greedy_reply(tmp_path):
    """Greedy decoding with each next step launched before the token is read: the same
    tokens and logits as plain eager greedy steps; a step that breaks the chain (another
    token, as a sampled one would be) is recomputed, not taken from the step launched ahead."""
    from engine.hearth.decode_graph import DecodeGraph

    path = write_tiny_gguf(tmp_path / "llama.gguf", test_forward.CASES["llama"])
    model, eager_cache = _prefilled(path, 4, paged=True)
    _, graph_cache = _prefilled(path, 4, paged=True)
    graph = DecodeGraph(model, graph_cache, position=4)
    eager_token = graph_token = test_forward.TOKENS[4]
    for pos in range(4, 20):
        if pos == 12:  # a token other than the greedy pick
            eager_token = graph_token = (graph_token + 1) % model.config.n_vocab
        expected = _eager_step(model, eager_cache, eager_token, pos)
        eager_token = int(torch.argmax(expected))
        logits, graph_token = graph.step(graph_token, pos, launch_ahead=True)
        torch.testing.assert_close(logits, expected, rtol=0, atol=1e-3)
        assert graph_token == eager_token


@pytest.fixture(scope="module")
def starter_file() -> str:
    path = os.environ.get("HEARTH_GPU_STARTER_MODEL")
    reference = json.loads(REFERENCE.read_text())
    if not path:
        pytest.skip(f"HEARTH_GPU_STARTER_MODEL is not set (the {reference['model']} GGUF)")
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != reference["model_sha256"]:
        pytest.fail(f"{path} is not the file the CPU reference was recorded from")
    return path


def hearth_trace_in_a_child(model: str, *extra: str) -> dict:
    """engine.runtime.hearth_trace in a fresh process, where llama.cpp (the vocabulary) loads
    before numpy: this process imported numpy first, and on the GPU machine a llama.cpp load
    after that ended with a segmentation fault (docs/backends.md)."""
    from engine.runtime.greedy_check import N_TOKENS, STORY

    command = [sys.executable, "-m", "engine.runtime.hearth_trace", model, "--prompt", STORY]
    command += ["--tokens", str(N_TOKENS), *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"hearth_trace ended with {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout[done.stdout.index("{") :])


@pytest.fixture(scope="module")
def starter_greedy(starter_file) -> dict:
    """The Hearth engine's own greedy trace: one token at a time, nothing launched ahead."""
    return hearth_trace_in_a_child(starter_file)


def test_starter_model_greedy_matches_the_cpu_build(starter_file, starter_greedy):
    from engine.runtime.greedy_check import check

    reference = json.loads(REFERENCE.read_text())
    # the recorded reference's tokens forced, its top-5 ids watched
    recorded = str(REFERENCE)
    forced = hearth_trace_in_a_child(starter_file, "--forced", recorded, "--watch", recorded)
    assert forced["device"] == starter_greedy["device"] == "cuda"
    verdict = check(reference, forced, starter_greedy["text"])
    print(f"== Hearth engine (CUDA) against the CPU build ({reference['system_info']})")
    print(verdict.report())
    assert verdict.passed, verdict.report()


def test_the_worker_launching_ahead_writes_the_same_greedy_reply(starter_file, starter_greedy):
    """Through the worker, greedy sampling launches each next decode step before reading the
    token (decode_graph.py): the reply must be the one the step-by-step trace wrote."""
    from engine.runtime import protocol as p
    from engine.runtime.greedy_check import N_TOKENS, STORY
    from tests.engine.runtime.conftest import GREEDY, RunningEngine

    running = RunningEngine()
    try:
        loaded = running.load(starter_file, engine="hearth", n_ctx=1024)
        assert isinstance(loaded, p.ModelLoaded) and loaded.engine == "hearth", loaded
        texts, done = running.run(prompt=STORY, sampling=GREEDY, max_tokens=N_TOKENS)
    finally:
        running.close()
    assert isinstance(done, p.GenerationDone), done
    assert "".join(texts) == starter_greedy["text"]


@pytest.mark.parametrize(("ram_layers", "slots"), [(1, 3), (2, 0)], ids=["cache", "in-place"])
def test_experts_in_ram_give_the_logits_of_experts_on_the_gpu(ram_layers, slots, tmp_path):
    """A tiny qwen3moe with experts in pinned host memory: behind 3 GPU slots (prefill in
    batches of slots, decode steps that miss, copies on the side stream), or read in place
    over the bus (then also through the decode step's CUDA graph): the logits of the experts
    all on the GPU."""
    from engine.hearth.decode_graph import DecodeGraph
    from engine.hearth.expert_offload import ExpertPlacement, RamExperts, offload_stats

    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", test_forward.CASES["qwen3moe"])
    info = read_model_info(path)
    config = model_config(info)
    tokens = test_forward.TOKENS
    rows = {}
    for name, placement in (
        ("gpu", ExpertPlacement()),
        ("ram", ExpertPlacement(ram_layers, slots)),
    ):
        tensors = GGUFTensors(str(path), info)
        model = Transformer.load(config, tensors, KernelsOps("cuda"), experts=placement)
        cache = TorchKVCache(
            n_layer=config.n_layer,
            n_head_kv=config.n_head_kv,
            head_dim=config.head_dim,
            n_ctx=test_forward.N_CTX,
            dtype=torch.float16,
            device="cuda",
        )
        prompt = torch.tensor(tokens[:6], device="cuda")
        positions = torch.arange(6, device="cuda")
        out = [model.forward(prompt, positions, cache, n_keys=6, all_logits=True)]
        for pos in range(6, len(tokens)):
            out.append(_eager_step(model, cache, tokens[pos], pos)[None])
        rows[name] = torch.cat(out)
        if name == "ram" and slots:
            assert isinstance(model.layers[-1].moe.experts, RamExperts)
            assert model.layers[-1].moe.experts.host.gate.packed.planes["qs"].device.type == "cpu"
            assert offload_stats(model.layers)["misses"] > 0
        if name == "ram" and not slots:
            assert not model.routes_on_host
            graph = DecodeGraph(model, cache, position=6)
            graph_logits, _ = graph.step(tokens[6], 6, launch_ahead=False)
            torch.testing.assert_close(graph_logits, rows["ram"][6], rtol=0, atol=1e-3)
    # the experts on the GPU read x in 8 bits as the FFN norm's launch wrote it, those in RAM
    # quantize the norm's f16 output themselves: one f16 step apart in a few logits (an H200:
    # 3 of 3,612 by 0.002)
    torch.testing.assert_close(rows["ram"], rows["gpu"], rtol=0, atol=4e-3)


def _eager_and_graph_logits(path, placement, before_graph=None, tune_split=False):
    """A tiny model's logits on the GPU with its experts placed by `placement`: a 6-token
    prefill and eager decode steps, then the same decode steps through a DecodeGraph's
    replays; (eager rows, replayed rows, the model, the graph). before_graph(model), if
    given, runs between the two and its result comes back as the graph's companion.
    tune_split: the graph times a split's shares and keeps the fastest (else the eager
    steps' share, for replays that match them)."""
    from engine.hearth.decode_graph import DecodeGraph

    info = read_model_info(path)
    config = model_config(info)
    tokens = test_forward.TOKENS
    model = Transformer.load(config, GGUFTensors(str(path), info), KernelsOps("cuda"),
                             experts=placement)  # fmt: skip
    cache = TorchKVCache(n_layer=config.n_layer, n_head_kv=config.n_head_kv,
                         head_dim=config.head_dim, n_ctx=test_forward.N_CTX,
                         dtype=torch.float16, device="cuda")  # fmt: skip
    prompt = torch.tensor(tokens[:6], device="cuda")
    out = [model.forward(prompt, torch.arange(6, device="cuda"), cache, n_keys=6,
                         all_logits=True)]  # fmt: skip
    for pos in range(6, len(tokens)):
        out.append(_eager_step(model, cache, tokens[pos], pos)[None])
    graph = DecodeGraph(model, cache, position=6, tune_split=tune_split)
    seen = before_graph(model) if before_graph is not None else None
    replayed = torch.stack(
        [graph.step(tokens[pos], pos, launch_ahead=False)[0].float().cpu().clone()
         for pos in range(6, len(tokens))]
    )  # fmt: skip
    return torch.cat(out).float().cpu(), replayed, model, graph, seen


def test_experts_on_the_cpu_run_as_host_nodes_of_the_decode_graph(tmp_path):
    """A tiny qwen3moe (4 picks of 8 experts, Q4_0) with its last layer's experts computed by
    ggml on the CPU: the eager steps (the host function queued with cuLaunchHostFunc) and
    the CUDA graph's replays (the same as a host node) give the logits of the experts all on
    the GPU, within ggml's rounding of x to q8_0 (tests/engine/hearth/test_cpu_experts.py:
    about 1% of the logits' norm); several replays, each picking other experts, and no host
    function failed."""
    from gguf import GGMLQuantizationType

    from engine.hearth.expert_offload import ExpertPlacement, ExpertsOnCpu
    from tests.engine.hearth.tiny_models import tiny_spec

    spec = tiny_spec("qwen3moe", expert_type=GGMLQuantizationType.Q4_0, n_expert_used=4)
    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", spec)
    rows, graphs = {}, {}
    placements = {
        "gpu": ExpertPlacement(),
        "cpu": ExpertPlacement(1, on_cpu=True, cpu_threads=2),
    }
    for name, placement in placements.items():
        rows[name], graphs[name], model, _, _ = _eager_and_graph_logits(path, placement)
        if name == "cpu":
            experts = model.layers[-1].moe.experts
            assert isinstance(experts, ExpertsOnCpu) and not model.routes_on_host
            assert not experts.errors()

    def relative(a, b):
        return float((a - b).norm() / b.norm())

    assert relative(rows["cpu"], rows["gpu"]) < 2e-2
    assert relative(graphs["cpu"], graphs["gpu"]) < 2e-2
    # the graph's replays are the eager steps (the same host function, the same ggml sums)
    assert relative(graphs["cpu"], rows["cpu"][6:]) < 1e-3


def test_a_split_runs_as_graph_pieces_with_host_steps_between(tmp_path):
    """A tiny qwen3moe (4 picks of 8 experts, Q4_0) with its last two layers' experts in RAM,
    split 1 of 4 picks a step to ggml and 3 copied into the GPU's slots (staged_experts.py):
    the eager steps and the decode graph's replays (pieces cut at each layer in RAM, the host
    steps between) give the logits of the experts all on the GPU within ggml's rounding of
    x, the replays those of the eager steps, and one host step a layer a replay."""
    from gguf import GGMLQuantizationType

    from engine.hearth.expert_offload import ExpertPlacement
    from engine.hearth.staged_experts import StagedExperts
    from tests.engine.hearth.tiny_models import tiny_spec

    spec = tiny_spec("qwen3moe", expert_type=GGMLQuantizationType.Q4_0, n_expert_used=4)
    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", spec)
    replays = len(test_forward.TOKENS) - 6
    rows, graphs = {}, {}

    def staged(model):
        found = [layer.moe.experts for layer in model.layers if layer.moe is not None]
        return [(e, e.steps) for e in found if isinstance(e, StagedExperts)]

    rows["gpu"], graphs["gpu"], _, _, _ = _eager_and_graph_logits(path, ExpertPlacement())
    split = ExpertPlacement(2, split_picks=1, cpu_threads=2)
    rows["split"], graphs["split"], model, graph, before = _eager_and_graph_logits(
        path, split, staged
    )
    assert len(before) == 2 and not model.routes_on_host
    assert len(graph._slots[0].pieces) == 3  # cut at each of the 2 layers in RAM
    assert [e.steps - steps for e, steps in before] == [replays] * 2

    def relative(a, b):
        return float((a - b).norm() / b.norm())

    assert relative(rows["split"], rows["gpu"]) < 2e-2
    assert relative(graphs["split"], graphs["gpu"]) < 2e-2
    assert relative(graphs["split"], rows["split"][6:]) < 1e-3


def test_the_decode_graph_times_a_splits_shares_and_keeps_the_fastest(tmp_path):
    """A tiny qwen3moe (4 picks of 8 experts, Q4_0), its last two layers' experts split 2 of 4
    as planned: the decode graph times 1, 2 and 3 picks by ggml, the first copy by either
    thread, in turn (split_tuning.ROUNDS each), sets the fastest on both layers, and its
    replays give the logits of the experts all on the GPU within ggml's rounding."""
    from gguf import GGMLQuantizationType

    from engine.hearth.expert_offload import ExpertPlacement
    from engine.hearth.split_tuning import ROUNDS, SplitSetting
    from engine.hearth.staged_experts import StagedExperts
    from tests.engine.hearth.tiny_models import tiny_spec

    spec = tiny_spec("qwen3moe", expert_type=GGMLQuantizationType.Q4_0, n_expert_used=4)
    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", spec)
    _, on_gpu, _, _, _ = _eager_and_graph_logits(path, ExpertPlacement())
    split = ExpertPlacement(2, split_picks=2, cpu_threads=2)
    _, replayed, model, graph, _ = _eager_and_graph_logits(path, split, tune_split=True)
    tuning = graph.split_tuning
    assert sorted(tuning.seconds) == [SplitSetting(c, e) for c in (1, 2, 3) for e in (0, 1)]
    assert all(len(t) == ROUNDS and min(t) > 0 for t in tuning.seconds.values())
    assert tuning.planned == SplitSetting(2) and tuning.chosen in tuning.seconds
    assert tuning.took_s > 0 and "tuned in" in tuning.text()
    staged = [layer.moe.experts for layer in model.layers
              if isinstance(getattr(layer.moe, "experts", None), StagedExperts)]  # fmt: skip
    assert len(staged) == 2
    assert {(e.cpu_picks, e.early_copies) for e in staged} == {
        (tuning.chosen.cpu_picks, tuning.chosen.early_copies)
    }
    assert float((replayed - on_gpu).norm() / on_gpu.norm()) < 2e-2


def test_a_pinned_copy_is_read_in_place_by_the_gpu():
    """expert_offload.pinned_copy (page-locked, registered with the driver) and device_view (a
    CUDA tensor over those pages): torch's kernels on the GPU read the host's bytes, and a write
    on the host is seen by the next GPU read (no copy was made). The expert GEMV (Triton) reads
    them in test_experts_in_ram_give_the_logits_of_experts_on_the_gpu[in-place]."""
    from engine.hearth.expert_offload import PAGE, device_view, pinned_copy

    source = torch.randint(0, 255, (3 * PAGE + 17,), dtype=torch.uint8)
    host = pinned_copy(source.view(-1))
    assert torch.equal(host, source) and host.data_ptr() % PAGE == 0
    view = device_view(host, torch.device("cuda"))
    assert view.device.type == "cuda" and view.shape == host.shape
    assert torch.equal(view.cpu(), source)
    halves = pinned_copy(torch.randn(64, 32).half())
    halves_view = device_view(halves, torch.device("cuda"))
    torch.testing.assert_close(halves_view.float().sum().cpu(), halves.float().sum())
    host[0] = (int(host[0]) + 1) % 256
    torch.cuda.synchronize()
    assert int(view[0].item()) == int(host[0])
