"""A speculative check's rows equal decode steps bit for bit (engine/hearth/verify.py), and so
does a step after rolling the check back: on plain torch here; on kernels/ with the plain and
the paged caches (every K format kind: row-quantized and kivi4's sealed pages) on a GPU, where
the `gpu` tests run (Triton's interpreter takes minutes a forward on the CI machine;
tests/kernels/test_gemv_rows_alike.py checks the GEMV's part of it there)."""

from __future__ import annotations

import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import TorchOps, rows_as_one_product
from engine.hearth.verify import check_logits, greedy_tokens
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

PROMPT = [5, 17, 300, 42, 0, 99, 7]
DRAFTS = [12, 250, 3, 88]
N_CTX = 32


def _model(path, ops) -> Transformer:
    info = read_model_info(path)
    return Transformer.load(model_config(info), GGUFTensors(str(path), info), ops)


def _plain_cache(model: Transformer, dtype=torch.float32) -> TorchKVCache:
    c = model.config
    dims = dict(n_layer=c.n_layer, n_head_kv=c.n_head_kv, head_dim=c.head_dim, n_ctx=N_CTX)
    return TorchKVCache(**dims, dtype=dtype, device=model.ops.device)


def _step(model, cache, token, position, fixed_shapes):
    n_keys = cache.n_ctx if fixed_shapes else position + 1
    device = model.ops.device
    ids, at = torch.tensor([token], device=device), torch.tensor([position], device=device)
    return model.forward(ids, at, cache, n_keys=n_keys)


def _steps_then_check(model, new_cache, *, fixed_shapes=False):
    """(each decode step's logits, the check's rows) over the same tokens after the prompt,
    each from a fresh cache: then the first rejected draft rolled back and decoded as a step,
    against the step at that position."""
    n, device = len(PROMPT), model.ops.device
    prompt, positions = torch.tensor(PROMPT, device=device), torch.arange(n, device=device)
    plain = new_cache()
    model.forward(prompt, positions, plain, n_keys=n)
    steps = [_step(model, plain, t, n + i, fixed_shapes).clone() for i, t in enumerate(DRAFTS)]
    checked = new_cache()
    model.forward(prompt, positions, checked, n_keys=n)
    rows = check_logits(model, checked, DRAFTS, n, fixed_shapes=fixed_shapes)
    # keep two rows, then decode the plain history's third token as a step
    assert checked.truncate(n + 2)
    after = _step(model, checked, DRAFTS[2], n + 2, fixed_shapes)
    return torch.stack(steps), rows, after


def test_rows_as_one_product_equals_one_row_products():
    torch.manual_seed(0)
    w, x = torch.randn(70, 96), torch.randn(5, 96)
    rows = rows_as_one_product(x, w)
    for t in range(5):
        assert torch.equal(rows[t : t + 1], x[t : t + 1] @ w.T)


@pytest.mark.parametrize(("arch", "dtype"), [("llama", torch.float32), ("qwen3", torch.float16),
                                             ("gemma3", torch.float32)])  # fmt: skip
def test_a_check_equals_decode_steps_bit_for_bit_on_torch(tmp_path, arch, dtype):
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=2))
    model = _model(path, TorchOps("cpu"))
    steps, rows, after = _steps_then_check(model, lambda: _plain_cache(model, dtype))
    assert torch.equal(rows, steps)
    assert torch.equal(after, steps[2])
    assert greedy_tokens(rows) == [int(torch.argmax(s)) for s in steps]
    assert not model.ops.rows_as_one  # switched back after the check


def test_without_rows_as_one_a_many_row_forward_differs():
    """What the design guards against: the plain many-row forward (a GEMM, grouped attention)
    does not give the decode step's bits, so equality above is not for free."""
    torch.manual_seed(1)
    w, x = torch.randn(512, 384), torch.randn(6, 384)
    together = x @ w.T
    assert any(not torch.equal(together[t : t + 1], x[t : t + 1] @ w.T) for t in range(6))


@pytest.fixture
def kernels_ops():
    """kernels/ on the GPU (the `gpu` tests)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    from engine.hearth.ops import KernelsOps

    return KernelsOps("cuda")


# llama: Q8_0/F16 matrices, the float GEMV; qwen3: Q4_K, the integer GEMV at one row
@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3"])
def test_a_check_equals_decode_steps_on_kernels(tmp_path, arch, kernels_ops):
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=2))
    model = _model(path, kernels_ops)
    steps, rows, after = _steps_then_check(model, lambda: _plain_cache(model), fixed_shapes=True)
    assert torch.equal(rows, steps)
    assert torch.equal(after, steps[2])


@pytest.mark.gpu
@pytest.mark.parametrize(("k_format", "v_format"), [("f16", "f16"), ("q8", "rot4"),
                                                    ("rot2", "rot4"), ("kivi4", "q8")])  # fmt: skip
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_a_check_equals_decode_steps_in_the_paged_cache(
    tmp_path, kernels_ops, arch, k_format, v_format
):
    from engine.hearth.paged_cache import PagedCacheAdapter

    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=2))
    model = _model(path, kernels_ops)
    c = model.config
    dims = dict(n_layer=c.n_layer, n_head_kv=c.n_head_kv, head_dim=c.head_dim, n_ctx=N_CTX)

    def paged():
        return PagedCacheAdapter(**dims, device="cuda", k_format=k_format, v_format=v_format)

    steps, rows, after = _steps_then_check(model, paged, fixed_shapes=True)
    assert torch.equal(rows, steps)
    assert torch.equal(after, steps[2])


@pytest.mark.parametrize(
    ("k_format", "position", "rows"),
    [("q8", 14, N_CTX - 14), ("kivi4", 0, 15), ("kivi4", 13, 2), ("kivi4", 15, 1),
     ("kivi4", 16, 15), ("kivi4", 30, 1)],
)  # fmt: skip
def test_kivi4_checks_stop_before_the_slot_that_seals_a_page(k_format, position, rows):
    from engine.hearth.paged_cache import PagedCacheAdapter

    cache = PagedCacheAdapter.__new__(PagedCacheAdapter)  # the rule reads only the spec
    cache.n_ctx = N_CTX
    cache.spec = type("Spec", (), {"k_format": k_format, "page_size": 16})()
    assert cache.rows_checkable(position) == rows


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [len(DRAFTS), 8])
@pytest.mark.parametrize(("k_format", "v_format"), [("f16", "f16"), ("q8", "rot4")])
def test_a_captured_check_equals_decode_steps(tmp_path, kernels_ops, k_format, v_format, rows):
    """check_graph.py: the check as one CUDA graph gives the eager check's bits, replayed at a
    later position too (its positions are device inputs); a graph of more rows than tokens
    (the next bucket size up, the rest padding) gives the same bits for the rows asked."""
    from engine.hearth.check_graph import CheckGraph
    from engine.hearth.paged_cache import PagedCacheAdapter

    path = write_tiny_gguf(tmp_path / "qwen3.gguf", tiny_spec("qwen3", n_layer=2))
    model = _model(path, kernels_ops)
    c = model.config
    dims = dict(n_layer=c.n_layer, n_head_kv=c.n_head_kv, head_dim=c.head_dim, n_ctx=N_CTX)
    cache = PagedCacheAdapter(**dims, device="cuda", k_format=k_format, v_format=v_format)
    n = len(PROMPT)
    prompt = torch.tensor(PROMPT, device="cuda")
    model.forward(prompt, torch.arange(n, device="cuda"), cache, n_keys=n)
    steps = torch.stack([_step(model, cache, t, n + i, True).clone() for i, t in enumerate(DRAFTS)])
    cache.truncate(n)
    graph = CheckGraph(model, cache, rows, position=n)
    logits, greedy = graph.run(DRAFTS, n)
    assert torch.equal(logits, steps)
    assert greedy == [int(torch.argmax(s)) for s in steps]
    # one position on: the step at n, then the graph replayed at n + 1
    cache.truncate(n)
    first = _step(model, cache, DRAFTS[0], n, True).clone()
    assert torch.equal(first, steps[0])
    later, _ = graph.run([*DRAFTS[1:], 7], n + 1)
    assert torch.equal(later[:3], steps[1:])
