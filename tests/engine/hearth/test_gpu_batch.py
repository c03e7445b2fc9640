"""The Hearth engine's batch on a GPU (HEARTH_GPU_TESTS=1 on the device machine): 20 sequences
of different lengths decoded together on kernels/ (the step's 20 rows through the dequantized
matrices' GEMM, the rows written into their own pages in one launch, the batched decode
attention, a prompt chunk beside decode rows) against each sequence decoded alone through the
one-sequence paged cache; a shared prefix copied on write; a decode step replayed from its
CUDA graph against the same step run eagerly; the batch decoder's steps launched ahead on the
graphs against its steps one at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth.batch_cache import KernelsBatchCache
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.ops import KernelsOps
from engine.hearth.paged_cache import PagedCacheAdapter
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)

N_SEQS, STEPS = 20, 3  # token ids below stay inside the tiny models' 301-token vocabulary


def _spec(arch: str):
    """The tiny model of `arch` with heads the KV kernels take (32 to 256 wide)."""
    return tiny_spec(arch, head_dim=32) if arch == "qwen3moe" else tiny_spec(arch)


def _prompt(i: int) -> list[int]:
    return [(7 * i + 3 * j) % 300 + 1 for j in range(2 + 3 * i)]  # 2 to 59 tokens


@pytest.fixture
def float_gemv_alone(monkeypatch):
    """A row alone on the float GEMV, as rows in a batch are: by default one row takes the
    integer GEMV (x quantized to 8 bits), which moves a tiny random model's logits by a few
    percent, and a q8 cache's rounding moves them further (measured on an H200: 1-6%); what is
    tested here is the batch cache and attention, so both sides take the same product."""
    import kernels.gemv

    monkeypatch.setattr(kernels.gemv, "DP4A_MAX_ROWS", 0)


@pytest.mark.parametrize(
    ("arch", "kv"),
    [("llama", "f16"), ("qwen3", "q8"), ("qwen3moe", "f16"), ("llama", "kivi4/rot4")],
)
def test_twenty_sequences_together_equal_each_alone(arch, kv, tmp_path, float_gemv_alone):
    """The 20-row step through the dequantized matrices' GEMM (KernelsOps._matmul_path past
    kernels.gemv.DP4A_MAX_ROWS rows) against each sequence alone on the one-row GEMV. kivi4
    keys: every row through the one-row GEMV on both sides (KernelsOps.rows_as_one), since a
    sealed page's 4-bit codes are per channel over its 16 rows: two decode rows off by the
    GEMM's ~1% moved every code of their page, and the step reading it (an H200, the GEMM's
    rows: 2.9% against 0.1% for the sequences that sealed nothing; on the CPU through the
    interpreter with the same products on both sides the batch equals each alone bit for bit)."""
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", _spec(arch))
    info = read_model_info(path)
    cfg = model_config(info)
    ops = KernelsOps("cuda")
    model = Transformer.load(cfg, GGUFTensors(str(path), info), ops)
    ops.rows_as_one = "kivi4" in kv
    dims = dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim)
    # kivi4 keys: pages of 16, so prompts and steps fill and seal pages
    k_format, v_format = kv.split("/") if "/" in kv else (kv, kv)
    kinds = dict(k_format=k_format, v_format=v_format, page_size=16 if "/" in kv else 64)
    cache = KernelsBatchCache(**dims, n_pages=256, device="cuda", **kinds)
    seqs = [cache.new_sequence() for _ in range(N_SEQS)]
    steps = [[(11 * i + s) % 300 + 1 for s in range(STEPS)] for i in range(N_SEQS)]

    def forward(row_seqs, tokens, positions, logit_rows):
        rows = cache.rows(row_seqs, positions)
        with torch.inference_mode():
            return model.forward(
                torch.tensor(tokens, device="cuda"), torch.tensor(positions, device="cuda"),
                rows, n_keys=0, logit_rows=torch.tensor(logit_rows, device="cuda"),
            ).float().cpu()  # fmt: skip

    got: list[list[torch.Tensor]] = [[] for _ in seqs]
    for i, seq in enumerate(seqs):  # prompts one by one: prefill, as the scheduler's chunks
        prompt = _prompt(i)
        start = cache.grow(seq, len(prompt))
        got[i].append(forward([seq] * len(prompt), prompt, list(range(start, start + len(prompt))),
                              [len(prompt) - 1])[0])  # fmt: skip
    for s in range(STEPS):  # all 20 decode together
        pos = [cache.grow(seq, 1) for seq in seqs]
        out = forward(seqs, [steps[i][s] for i in range(N_SEQS)], pos, list(range(N_SEQS)))
        for i in range(N_SEQS):
            got[i].append(out[i])
    errors = []
    for i in range(N_SEQS):
        alone = PagedCacheAdapter(**dims, n_ctx=128, device="cuda", **kinds)
        prompt = _prompt(i)
        with torch.inference_mode():
            rows = [model.forward(torch.tensor(prompt, device="cuda"),
                                  torch.arange(len(prompt), device="cuda"), alone,
                                  n_keys=len(prompt))]  # fmt: skip
            for s, token in enumerate(steps[i]):
                position = torch.tensor([len(prompt) + s], device="cuda")
                rows.append(model.forward(torch.tensor([token], device="cuda"), position, alone,
                                          n_keys=128))  # fmt: skip
        expected = torch.stack([r.float().cpu() for r in rows]).numpy()
        actual = torch.stack(got[i]).numpy()
        errors.append(np.linalg.norm(actual - expected) / np.linalg.norm(expected))
    # the same products on both sides (float_gemv_alone) up to rounding: the GEMM's f16
    # weights and x (f16 products, float32 sums) against the one-row GEMV's float32 sums of f16
    # x, and the pages' layout; measured on an H200: 0.3-1.05% (qwen3 with a q8 cache the most)
    assert max(errors) < 2e-2, errors


def test_the_captured_steps_equal_the_eager_ones(tmp_path):
    """BatchGraphs: 3 and 5 sequences (buckets 4 and 8, spare rows on the scratch page) replayed
    from CUDA graphs give the eager step's logits, and nobody's pages are written by the spare
    rows."""
    from engine.hearth.batch_graph import BatchGraphs

    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama"))
    info = read_model_info(path)
    cfg = model_config(info)
    model = Transformer.load(cfg, GGUFTensors(str(path), info), KernelsOps("cuda"))
    dims = dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim)

    def run(captured: bool, n: int) -> np.ndarray:
        cache = KernelsBatchCache(**dims, n_pages=32, device="cuda", k_format="q8", v_format="q8",
                                  max_sequences=9)  # fmt: skip
        graphs = BatchGraphs(model, cache, max_rows=8) if captured else None
        seqs = [cache.new_sequence() for _ in range(n)]
        out = []
        for step in range(4):
            pos = [cache.grow(s, 1) for s in seqs]
            tokens = [(5 * i + step) % 300 + 1 for i in range(n)]
            if graphs is not None:
                out.append(graphs.step(seqs, tokens, pos).float().cpu())
            else:
                rows = cache.rows(seqs, pos)
                with torch.inference_mode():
                    out.append(model.forward(torch.tensor(tokens, device="cuda"),
                                             torch.tensor(pos, device="cuda"), rows, n_keys=0,
                                             all_logits=True).float().cpu())  # fmt: skip
        return torch.stack(out).numpy()

    for n in (3, 5):
        eager, replayed = run(False, n), run(True, n)
        error = np.linalg.norm(replayed - eager) / np.linalg.norm(eager)
        assert error < 1e-3, (n, error)


def test_a_shared_prefix_on_the_gpu_is_computed_once_and_copied_on_write(tmp_path):
    """b's prompt agrees with a's 150 tokens for 100 (pages of 64): b takes a's first page by
    reference and its second in part (36 positions), computes 3 tokens, and its first write
    copies that page (PagedKVCache.copy_page); b's logits equal b alone, a's next step equals a
    alone (its pages untouched by b)."""
    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama"))
    info = read_model_info(path)
    cfg = model_config(info)
    model = Transformer.load(cfg, GGUFTensors(str(path), info), KernelsOps("cuda"))
    dims = dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim)
    cache = KernelsBatchCache(**dims, n_pages=16, device="cuda", k_format="q8", v_format="q8")
    prompt_a = [(7 * j + 3) % 300 + 1 for j in range(150)]
    prompt_b = [*prompt_a[:100], 9, 8, 7]

    def forward(row_seqs, tokens, positions):
        rows = cache.rows(row_seqs, positions)
        with torch.inference_mode():
            return model.forward(
                torch.tensor(tokens, device="cuda"), torch.tensor(positions, device="cuda"),
                rows, n_keys=0, logit_rows=torch.tensor([len(tokens) - 1], device="cuda"),
            ).float().cpu()[0]  # fmt: skip

    def alone(prompt, extra=()):
        one = PagedCacheAdapter(**dims, n_ctx=256, device="cuda", k_format="q8", v_format="q8")
        with torch.inference_mode():
            out = model.forward(
                torch.tensor(prompt, device="cuda"),
                torch.arange(len(prompt), device="cuda"),
                one,
                n_keys=len(prompt),
            )
            for i, token in enumerate(extra):
                out = model.forward(torch.tensor([token], device="cuda"),
                                    torch.tensor([len(prompt) + i], device="cuda"), one,
                                    n_keys=256)  # fmt: skip
        return out.float().cpu().reshape(-1, out.shape[-1])[-1].numpy()

    def close(actual, expected):
        return np.linalg.norm(actual.numpy() - expected) / np.linalg.norm(expected) < 3e-2

    a = cache.new_sequence()
    assert cache.grow(a, 150) == 0
    forward([a] * 150, prompt_a, list(range(150)))
    assert cache.publish(a, prompt_a) == 2
    b = cache.new_sequence(prompt_b, limit=len(prompt_b) - 1)
    assert cache.length(b) == 100
    assert cache.grow(b, 3) == 100
    got_b = forward([b] * 3, prompt_b[100:], [100, 101, 102])
    assert cache.pool.pages(b)[0] == cache.pool.pages(a)[0]
    assert cache.pool.pages(b)[1] != cache.pool.pages(a)[1]
    assert close(got_b, alone(prompt_b))
    pos = cache.grow(a, 1)
    assert close(forward([a], [42], [pos]), alone(prompt_a, [42]))


@pytest.mark.parametrize(
    ("n_rows", "arch", "k_format"),
    [(5, "llama", "f16"), (20, "llama", "f16"), (20, "qwen3", "f16"), (20, "qwen3moe", "f16"),
     (20, "llama", "kivi4")],
)  # fmt: skip
def test_a_captured_decode_step_equals_the_eager_one(n_rows, arch, k_format, tmp_path):
    """BatchGraphs (engine/hearth/batch_graph.py): a decode step of 5 rows (the integer GEMV,
    bucket 8) and of 20 (the dequantized matrices' GEMM, bucket 32; qwen3's Q4_K matrices take
    the dequantizing MMA where HEARTH_DEQUANT_MMA_ROWS or its ROWS_WON says so) replayed from
    its CUDA graph gives the logits of the same step run eagerly on an identical cache, and the
    rows of the bucket's spare slots touch no sequence's pages."""
    from engine.hearth.batch_graph import BatchGraphs

    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", _spec(arch))
    info = read_model_info(path)
    cfg = model_config(info)
    model = Transformer.load(cfg, GGUFTensors(str(path), info), KernelsOps("cuda"))
    dims = dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim)
    prompts = [_prompt(i) for i in range(n_rows)]

    def cache_with_prompts():
        # kivi4 keys: pages of 16, so that some rows fill a page (sealed by the step) and the
        # graph reads each row's open page slot from its static copy
        page = 16 if k_format == "kivi4" else 64
        cache = KernelsBatchCache(
            **dims, n_pages=256, device="cuda", k_format=k_format, v_format="f16",
            max_sequences=n_rows + 1, page_size=page,
        )  # fmt: skip
        seqs = [cache.new_sequence() for _ in prompts]
        for seq, prompt in zip(seqs, prompts, strict=True):
            cache.grow(seq, len(prompt))
            positions = list(range(len(prompt)))
            with torch.inference_mode():
                model.forward(
                    torch.tensor(prompt, device="cuda"), torch.tensor(positions, device="cuda"),
                    cache.rows([seq] * len(prompt), positions), n_keys=0,
                    logit_rows=torch.tensor([len(prompt) - 1], device="cuda"),
                )  # fmt: skip
        return cache, seqs

    eager_cache, eager_seqs = cache_with_prompts()
    graph_cache, graph_seqs = cache_with_prompts()
    graphs = BatchGraphs(model, graph_cache, max_rows=32)
    for step in range(2):  # the second reads what the first wrote (and sealed: kivi4 keys)
        tokens = [(11 * i + 5 + step) % 300 + 1 for i in range(n_rows)]
        positions = [len(p) + step for p in prompts]
        for seq in eager_seqs:
            eager_cache.grow(seq, 1)
        with torch.inference_mode():
            eager = model.forward(
                torch.tensor(tokens, device="cuda"), torch.tensor(positions, device="cuda"),
                eager_cache.rows(eager_seqs, positions), n_keys=0,
                logit_rows=torch.arange(n_rows, device="cuda"),
            ).float().cpu()  # fmt: skip
        for seq in graph_seqs:
            graph_cache.grow(seq, 1)
        replayed = graphs.step(graph_seqs, tokens, positions).float().cpu()
        torch.testing.assert_close(replayed, eager, rtol=0, atol=1e-3)
    graphs.close()


@pytest.mark.parametrize("kv", ["f16/f16", "kivi4/rot4"])
def test_steps_launched_ahead_on_the_graphs_give_the_tokens_of_steps_one_at_a_time(kv, tmp_path):
    """engine/runtime/hearth_batch.py on a GPU: each decode step replayed from its CUDA graph
    before the last one's tokens reach the host, its input those tokens on the device (greedy,
    and drawn with seeds on the device); with kivi4 keys too (each row's open page slot in the
    graph's static copy, the prompts' chunks eager). The
    tiny model needs a real vocabulary for the worker's model (HEARTH_TEST_VOCAB: a GGUF with
    one, e.g. llama.cpp's models/ggml-vocab-llama-bpe.gguf; else the starter model)."""
    from engine.runtime import protocol as p
    from engine.runtime.hearth_driver import HearthModel
    from tests.engine.runtime.test_hearth_batch import (
        PROMPTS,
        SAMPLED,
        assert_launched_ahead_equals_one_at_a_time,
    )

    vocab = os.environ.get("HEARTH_TEST_VOCAB")
    if not vocab:
        from engine.starter_model import starter_model_path

        vocab = starter_model_path()
        if vocab is None:
            pytest.skip("no vocabulary: set HEARTH_TEST_VOCAB or install the starter model")
    path = write_tiny_gguf(tmp_path / "tiny.gguf", tiny_spec("llama", n_layer=2), vocab_from=vocab)
    type_k, type_v = kv.split("/")
    model = HearthModel(p.ModelParams(path=str(path), engine="hearth", n_ctx=512,
                                      type_k=type_k, type_v=type_v))  # fmt: skip
    try:
        assert model.hearth.device.startswith("cuda")
        assert_launched_ahead_equals_one_at_a_time(model, PROMPTS, max_tokens=12)
        assert_launched_ahead_equals_one_at_a_time(model, PROMPTS, max_tokens=12, sampling=SAMPLED)
    finally:
        model.close()


@pytest.mark.parametrize("arch", ["llama", "qwen3", "qwen3moe"])
def test_a_step_with_prompt_chunks_replayed_in_parts_equals_the_eager_pass(
    arch, tmp_path, float_gemv_alone
):
    """engine/hearth/batch_chunks.py on the GPU: a step of 3 decode rows, a 40-token chunk (64
    rows padded) and a 9-token one (16 rows) run as the decode graphs' step and each chunk
    replayed from its graph (each shape's first chunk, on sequences made for it, ran eagerly
    before), against the same step in one eager pass on an identical cache: the step's
    logits, and the next decode step's from what each left in the cache."""
    from engine.hearth.batch_chunks import BatchChunks
    from engine.hearth.batch_graph import BatchGraphs

    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", _spec(arch))
    info = read_model_info(path)
    cfg = model_config(info)
    model = Transformer.load(cfg, GGUFTensors(str(path), info), KernelsOps("cuda"))
    dims = dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim)
    decoding = [_prompt(i) for i in (3, 5, 8)]
    chunks = [_prompt(13)[:40], _prompt(3)[:9]]  # of 41 and 11 tokens

    def forward(cache, seqs, tokens, positions, logit_rows):
        with torch.inference_mode():
            return model.forward(
                torch.tensor(tokens, device="cuda"), torch.tensor(positions, device="cuda"),
                cache.rows(seqs, positions), n_keys=0,
                logit_rows=torch.tensor(logit_rows, device="cuda"),
            )  # fmt: skip

    def step_and_next(parts: bool):
        cache = KernelsBatchCache(**dims, n_pages=96, device="cuda", k_format="f16",
                                  v_format="f16", max_sequences=12)  # fmt: skip
        seqs = [cache.new_sequence() for _ in range(5)]
        for seq, prompt in zip(seqs[:3], decoding, strict=True):
            cache.grow(seq, len(prompt))
            forward(cache, [seq] * len(prompt), prompt, list(range(len(prompt))), [len(prompt) - 1])
        row_seqs, tokens, positions = [], [], []
        for seq, prompt in zip(seqs[:3], decoding, strict=True):
            row_seqs.append(seq)
            tokens.append(prompt[0])
            positions.append(cache.grow(seq, 1))
        for seq, chunk in zip(seqs[3:], chunks, strict=True):
            cache.grow(seq, len(chunk))
            row_seqs += [seq] * len(chunk)
            tokens += chunk
            positions += range(len(chunk))
        logit_rows = [0, 1, 2, 3 + 40 - 1, 3 + 40 + 9 - 1]
        assert len(tokens) == logit_rows[-1] + 1
        if parts:
            graphs = BatchGraphs(model, cache, max_rows=8)
            split = BatchChunks(model, cache, graphs.step, 128, max_rows=64)
            for chunk in chunks:  # each shape's first chunk: eager, on a sequence of its own
                first = cache.new_sequence()
                cache.grow(first, len(chunk))
                with torch.inference_mode():
                    split.forward([first] * len(chunk), chunk, list(range(len(chunk))),
                                  [len(chunk) - 1])  # fmt: skip
                cache.free_sequence(first)
            with torch.inference_mode():
                logits = split.forward(row_seqs, tokens, positions, logit_rows).float().cpu()
            assert len(split.prefill._graphs) == 2, split.prefill.failures
        else:
            logits = forward(cache, row_seqs, tokens, positions, logit_rows).float().cpu()
        next_positions = [cache.grow(seq, 1) for seq in seqs]
        after = forward(cache, seqs, [7, 8, 9, 10, 11], next_positions, list(range(5)))
        return logits, after.float().cpu()

    eager, eager_next = step_and_next(parts=False)
    parts, parts_next = step_and_next(parts=True)
    scale = float(eager.abs().max())
    assert eager.std() > 0.1
    torch.testing.assert_close(parts, eager, rtol=0, atol=2e-2 * scale)
    torch.testing.assert_close(parts_next, eager_next, rtol=0, atol=2e-2 * scale)
