"""The batch cache on kernels/ (KernelsBatchCache: PagedKVCache.write_rows, the batched decode
attention, the prefill path for a prompt chunk) against the one-sequence paged cache
(PagedCacheAdapter), on the CPU through Triton's interpreter (slow: one tiny model, short
sequences); the forward pass's matrices in plain torch here, so only the cache differs."""

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
if torch.cuda.is_available():
    pytest.skip("CPU tensors through the interpreter", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"

from engine.gguf import read_model_info  # noqa: E402
from engine.hearth.batch_cache import KernelsBatchCache  # noqa: E402
from engine.hearth.config import model_config  # noqa: E402
from engine.hearth.forward import Transformer  # noqa: E402
from engine.hearth.ops import TorchOps  # noqa: E402
from engine.hearth.paged_cache import PagedCacheAdapter  # noqa: E402
from engine.hearth.weights import GGUFTensors  # noqa: E402
from tests.engine.hearth.batch_steps import decode_together  # noqa: E402
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf  # noqa: E402

PROMPTS = [[5, 17, 300], [42, 0, 99, 256, 7, 7, 123, 8, 9], [64, 11]]
STEPS = [[12], [1], [200]]
PAGE = 16


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_tiny_gguf(tmp_path_factory.mktemp("bk") / "m.gguf", tiny_spec("llama", n_layer=1))
    info = read_model_info(path)
    return Transformer.load(model_config(info), GGUFTensors(str(path), info), TorchOps("cpu"))


def _dims(model):
    cfg = model.config
    return dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim)


def _alone(model, prompt, steps, k_format, v_format):
    cache = PagedCacheAdapter(**_dims(model), n_ctx=64, device="cpu", k_format=k_format,
                              v_format=v_format, page_size=PAGE)  # fmt: skip
    n = len(prompt)
    rows = [model.forward(torch.tensor(prompt), torch.arange(n), cache, n_keys=n)]
    for i, token in enumerate(steps):
        rows.append(model.forward(torch.tensor([token]), torch.tensor([n + i]), cache, n_keys=64))
    return torch.stack(rows).numpy()


# kivi4 keys: prompts whose next decode row fills a page (15 and 31 tokens), so the batch's
# one-launch writes seal pages too; the three prompts computed in one step write their chunks
# one by one (the cache keeps one chunk's exact rows)
PAGE_ENDS = [[(11 * i + j) % 300 + 1 for j in range(n)] for i, n in enumerate((14, 15, 31))]


def _alone_cut_back(model, first, keep, then, k_format, v_format):
    """One sequence: `first` computed, the cache cut back to `keep` positions (kivi4 keys
    reopen the page there), then `then`: the last row's logits."""
    cache = PagedCacheAdapter(**_dims(model), n_ctx=64, device="cpu", k_format=k_format,
                              v_format=v_format, page_size=PAGE)  # fmt: skip
    n = len(first)
    model.forward(torch.tensor(first), torch.arange(n), cache, n_keys=n)
    cache.truncate(keep)
    positions = torch.arange(keep, keep + len(then))
    return model.forward(torch.tensor(then), positions, cache, n_keys=keep + len(then)).numpy()


@pytest.mark.parametrize(
    ("k_format", "v_format", "prompts"),
    [("q8", "rot4", PROMPTS), ("kivi4", "rot4", PAGE_ENDS)],  # f16: test_kv_batch_rows
)
def test_batched_decode_on_the_kernels_equals_each_sequence_alone(
    model, k_format, v_format, prompts
):
    cache = KernelsBatchCache(**_dims(model), n_pages=8, device="cpu", k_format=k_format,
                              v_format=v_format, page_size=PAGE)  # fmt: skip
    seqs, got = decode_together(model, cache, prompts, STEPS)
    for i, (prompt, steps) in enumerate(zip(prompts, STEPS, strict=True)):
        expected = _alone(model, prompt, steps, k_format, v_format)
        assert expected.std() > 0.1
        np.testing.assert_allclose(got[i], expected, atol=2e-3 * max(1.0, np.abs(expected).max()))
    cache.free_sequence(seqs[1])
    kept = sum(-(-(len(prompts[i]) + len(STEPS[i])) // PAGE) for i in (0, 2))
    assert cache.pool.free_pages == 8 - kept


def test_attention_sinks_with_kivi4_keys_in_the_batch_equal_each_sequence_alone(tmp_path):
    """gpt-oss's attention sinks (the batch attends each sequence through gather and torch)
    with kivi4 keys, whose prompt chunks are written just before they attend: prompts of 15
    and 31 tokens whose decode rows seal pages, every one in the first step."""
    path = write_tiny_gguf(tmp_path / "g.gguf", tiny_spec("gpt-oss", head_dim=32))
    info = read_model_info(path)
    sinks = Transformer.load(model_config(info), GGUFTensors(str(path), info), TorchOps("cpu"))
    cache = KernelsBatchCache(**_dims(sinks), n_pages=8, device="cpu", k_format="kivi4",
                              v_format="rot4", page_size=PAGE)  # fmt: skip
    _, got = decode_together(sinks, cache, PAGE_ENDS, STEPS)
    for i, (prompt, steps) in enumerate(zip(PAGE_ENDS, STEPS, strict=True)):
        expected = _alone(sinks, prompt, steps, "kivi4", "rot4")
        assert expected.std() > 0.1
        np.testing.assert_allclose(got[i], expected, atol=2e-3 * max(1.0, np.abs(expected).max()))


def _counted(ops, monkeypatch, name: str) -> list[int]:
    """The row counts of every call of ops._k.<name> from now on."""
    calls = []
    kernel = getattr(ops._k, name)
    monkeypatch.setattr(ops._k, name, lambda x, *a, **k: calls.append(len(x)) or kernel(x, *a, **k))
    return calls


def test_a_few_rows_take_the_integer_gemv_and_more_the_dequantized_gemm(tmp_path, monkeypatch):
    """KernelsOps._matmul_path on a Q4_K matrix: up to kernels.gemv.DP4A_MAX_ROWS rows (a small
    batch's decode step) through the integer GEMV in one launch, one row more through the
    dequantized matrix's GEMM; the GEMV's rows agree with the GEMM's within its 8-bit x."""
    import kernels.gemv
    from engine.hearth.ops import KernelsOps

    path = write_tiny_gguf(tmp_path / "m.gguf", tiny_spec("qwen3", n_layer=1))
    info = read_model_info(path)
    ops = KernelsOps("cpu")
    w = ops.prepare(GGUFTensors(str(path), info).matrix("blk.0.attn_q.weight"))
    assert w.fmt.name == "Q4_K"
    few = kernels.gemv.DP4A_MAX_ROWS
    x = torch.randn(few + 1, w.n_in, generator=torch.Generator().manual_seed(0))
    gemv_calls = _counted(ops, monkeypatch, "quant_matmul")
    dense = ops.matmul(x, w)
    assert gemv_calls == []
    integer = ops.matmul(x[:few], w)
    assert gemv_calls == [few]
    scale = float(dense.abs().max())
    np.testing.assert_allclose(integer.numpy(), dense[:few].numpy(), atol=2e-2 * scale)


@pytest.mark.parametrize("k_format", ["q8", "kivi4"])
def test_a_shared_prefix_on_the_kernels_is_copied_on_write(model, k_format):
    """b's prompt agrees with a's for 20 tokens: b takes a's first page by reference and its
    second (16 of whose 16 positions a wrote) in part; b's first write copies that page in the
    kernels' storage (PagedKVCache.copy_page) and its block table follows (assign). b equals b
    alone, and a's K and V are unchanged by b. kivi4 keys: b reopens the shared second page
    (its 4-bit keys dequantized into b's open page) before its first write."""
    v_format = "rot4"
    cache = KernelsBatchCache(**_dims(model), n_pages=8, device="cpu", k_format=k_format,
                              v_format=v_format, page_size=PAGE)  # fmt: skip
    prompt_a = [(7 * i + 3) % 500 for i in range(33)]
    prompt_b = [*prompt_a[:20], 1, 2, 3]

    def prefill(seq, tokens):
        start = cache.grow(seq, len(tokens))
        positions = list(range(start, start + len(tokens)))
        rows = cache.rows([seq] * len(tokens), positions)
        return model.forward(torch.tensor(tokens), torch.tensor(positions), rows, n_keys=0,
                             logit_rows=torch.tensor([len(tokens) - 1]))[0]  # fmt: skip

    a = cache.new_sequence()
    prefill(a, prompt_a)
    kernel = cache.cache
    rows_a = kernel.read_rows(0, cache.kernel_sequence(a))
    assert cache.publish(a, prompt_a) == 2
    b = cache.new_sequence(prompt_b, limit=len(prompt_b) - 1)
    assert cache.length(b) == 20 and cache.pool.pages(b) == cache.pool.pages(a)[:2]
    got_b = prefill(b, prompt_b[20:])  # 3 tokens computed, not 23
    pages_a, pages_b = cache.pool.pages(a), cache.pool.pages(b)
    assert pages_b[0] == pages_a[0] and pages_b[1] != pages_a[1]
    assert kernel.block_table(cache.kernel_sequence(b))[:2].tolist() == list(pages_b[:2])
    if k_format == "kivi4":  # a's sealed page read back, as b alone cut back to 20 reads it
        expected = _alone_cut_back(model, prompt_a, 20, prompt_b[20:], k_format, v_format)
    else:
        expected = _alone(model, prompt_b, [], k_format, v_format)[0]
    np.testing.assert_allclose(got_b.numpy(), expected,
                               atol=2e-3 * max(1.0, np.abs(expected).max()))  # fmt: skip
    cache.free_sequence(b)
    after = kernel.read_rows(0, cache.kernel_sequence(a))
    assert all(np.array_equal(x, y) for x, y in zip(rows_a, after, strict=True))
    assert cache.pool.free_pages == 8 - 3  # a's three pages; b's copy freed


def test_the_measured_mma_rows_apply_on_a_gpu_only(monkeypatch):
    """ROWS_WON is what the MMA won compiled on an H200; in Triton's interpreter the
    dequantized GEMM is the fast path, so the engine on the CPU takes no row count to the MMA
    unless HEARTH_DEQUANT_MMA_ROWS says so."""
    import kernels.dequant_mma
    from engine.hearth.ops import KernelsOps

    monkeypatch.delenv("HEARTH_DEQUANT_MMA_ROWS", raising=False)
    assert kernels.dequant_mma.ROWS_WON  # measured: not empty
    assert KernelsOps("cpu").dequant_mma_rows == {}
    monkeypatch.setenv("HEARTH_DEQUANT_MMA_ROWS", "Q6_K:9-64")
    assert KernelsOps("cpu").dequant_mma_rows == {"Q6_K": (9, 64)}


def test_the_mma_takes_the_few_rows_its_table_lists_before_the_integer_gemv(monkeypatch):
    """At 2-8 rows the integer GEMV is the path unless the MMA's rows (ROWS_WON, or
    HEARTH_DEQUANT_MMA_ROWS) list the count: then the MMA, and the norm before it does not
    write x in 8 bits for it."""
    from types import SimpleNamespace

    from engine.hearth.ops import KernelsOps

    q4 = SimpleNamespace(fmt=SimpleNamespace(name="Q4_K"))
    monkeypatch.delenv("HEARTH_DEQUANT_MMA_ROWS", raising=False)
    ops = KernelsOps("cpu")
    assert [ops._matmul_path(m, q4) for m in (1, 4, 9)] == ["gemv", "gemv", "dequant"]
    assert ops._integer_readers(4, [q4]) == 1
    monkeypatch.setenv("HEARTH_DEQUANT_MMA_ROWS", "Q4_K:4-64")
    ops = KernelsOps("cpu")
    assert [ops._matmul_path(m, q4) for m in (1, 2, 4, 9)] == [
        "gemv", "gemv", "dequant_mma", "dequant_mma",
    ]  # fmt: skip
    assert ops._integer_readers(4, [q4]) == 0
    assert ops._integer_readers(2, [q4]) == 1


def test_a_batch_through_the_dequantizing_mma_equals_the_dequantized_gemm(tmp_path, monkeypatch):
    """KernelsOps._matmul_path with the dequantizing MMA forced for 2-64 rows of Q4_K
    (HEARTH_DEQUANT_MMA_ROWS; the engine on the CPU takes none of kernels.dequant_mma.ROWS_WON,
    its H200 figures): a Q4_K model's prompts and decode steps of 3 sequences give the logits of the
    dequantized GEMM's path within the MMA's f16 x and weights, and its Q4_K matrices went
    through the MMA at both steps."""
    import kernels.dequant_mma
    import kernels.gemv
    from engine.hearth.ops import KernelsOps

    monkeypatch.setattr(kernels.gemv, "DP4A_MAX_ROWS", 1)  # past one row: no integer GEMV
    path = write_tiny_gguf(tmp_path / "m.gguf", tiny_spec("qwen3", n_layer=1))
    info = read_model_info(path)
    calls: list[int] = []
    mma = kernels.dequant_mma.dequant_mma
    monkeypatch.setattr(
        kernels.dequant_mma,
        "dequant_mma",
        lambda x, *a, **k: calls.append(len(x)) or mma(x, *a, **k),
    )
    monkeypatch.setattr(kernels.dequant_mma, "ROWS_WON", {})
    logits = {}
    for forced in (None, "Q4_K:2-64"):
        if forced is None:
            monkeypatch.delenv("HEARTH_DEQUANT_MMA_ROWS", raising=False)
        else:
            monkeypatch.setenv("HEARTH_DEQUANT_MMA_ROWS", forced)
        model = Transformer.load(
            model_config(info), GGUFTensors(str(path), info), KernelsOps("cpu")
        )
        cache = KernelsBatchCache(**_dims(model), n_pages=8, device="cpu", k_format="q8",
                                  v_format="rot4", page_size=PAGE)  # fmt: skip
        logits[forced is not None] = decode_together(model, cache, PROMPTS, STEPS)[1]
        if forced is None:
            assert calls == []
    # the model's Q4_K matrices at the 14 prompt rows, then at the 3-row decode step
    assert sorted(set(calls)) == [3, 14] and calls.count(3) == calls.count(14)
    for got, expected in zip(logits[True], logits[False], strict=True):
        assert expected.std() > 0.1
        np.testing.assert_allclose(got, expected, atol=5e-3 * max(1.0, np.abs(expected).max()))


def test_a_step_with_prompt_chunks_in_parts_equals_it_in_one_pass(model):
    """batch_chunks.BatchChunks: a step of one decode row (a), a 17-token chunk (b, padded to
    32 rows on a view of the cache, its attention over 64 slots, those past b's pages read as
    zeros) and a 3-token chunk (c, padded to 16 rows, the padding in the rest of its page)
    gives the logits one pass gives, and leaves each sequence's cache as one pass does: the
    next step's logits agree, and so do the stored rows of every sequence (a's page sits
    beside b's and c's in the pool, untouched by their padding). Each chunk is its shape's
    first, run eagerly as its graph would be captured (no capture on the CPU)."""
    from engine.hearth.batch_chunks import BatchChunks
    from tests.engine.hearth.batch_steps import forward_rows

    def started(cache):
        a, b, c = (cache.new_sequence() for _ in range(3))
        cache.grow(a, 5)
        forward_rows(model, cache, [a] * 5, [3, 1, 4, 1, 5], list(range(5)), [4])
        for seq, n in ((a, 1), (b, 17), (c, 3)):
            cache.grow(seq, n)
        return a, b, c

    prompts = PROMPTS[1] + PROMPTS[2] + PROMPTS[1][:6] + PROMPTS[0]
    seqs_of = lambda a, b, c: [a] + [b] * 17 + [c] * 3  # noqa: E731
    positions = [5, *range(17), *range(3)]
    tokens = [9, *prompts]
    caches, got = [], []
    for parts in (False, True):
        cache = KernelsBatchCache(**_dims(model), n_pages=12, device="cpu", k_format="q8",
                                  v_format="rot4", page_size=PAGE)  # fmt: skip
        a, b, c = started(cache)
        seqs = seqs_of(a, b, c)
        if parts:

            def decode_rows(s, t, p, cache=cache):  # the decode graphs' step, eagerly
                return forward_rows(model, cache, s, t, p, list(range(len(s))))

            chunks = BatchChunks(model, cache, decode_rows, 64, max_rows=64)
            got.append(chunks.forward(seqs, tokens, positions, [0, 17, 20]))
            with pytest.raises(ValueError, match="inside a prompt chunk"):
                chunks.forward(seqs, tokens, positions, [3])
            chunks.close()
        else:
            got.append(forward_rows(model, cache, seqs, tokens, positions, [0, 17, 20]))
        for seq in (a, b, c):
            cache.grow(seq, 1)
        nxt = forward_rows(model, cache, [a, b, c], [2, 7, 1], [6, 17, 3], [0, 1, 2])
        caches.append((cache, (a, b, c), nxt))
    one, parts = got
    assert one.std() > 0.1
    scale = max(1.0, float(one.abs().max()))
    np.testing.assert_allclose(parts.numpy(), one.numpy(), atol=2e-3 * scale)
    np.testing.assert_allclose(caches[1][2].numpy(), caches[0][2].numpy(), atol=2e-3 * scale)
    (cache_one, seqs_one, _), (cache_parts, seqs_parts, _) = caches
    for s1, s2 in zip(seqs_one, seqs_parts, strict=True):
        n = cache_one.length(s1)
        k1, v1 = cache_one.cache.gather(0, cache_one.kernel_sequence(s1), n)
        k2, v2 = cache_parts.cache.gather(0, cache_parts.kernel_sequence(s2), n)
        torch.testing.assert_close(k2, k1, atol=2e-2, rtol=0)
        torch.testing.assert_close(v2, v1, atol=2e-2, rtol=0)
