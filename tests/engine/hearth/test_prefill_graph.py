"""engine.hearth.prefill_graph on the CPU: what lets one captured chunk serve chunks of other
lengths and places, namely that padding rows after the chunk and slots read past its last
position (masked) leave its logits and the cache's history as they are, for each cache the
worker prefills (the graphs themselves are captured on a GPU: test_gpu.py)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (triton) is not installed", allow_module_level=True)

import torch

if not torch.cuda.is_available():
    assert "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") is not None
    os.environ["TRITON_INTERPRET"] = "1"

from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import TorchOps
from engine.hearth.paged_cache import PagedCacheAdapter
from engine.hearth.prefill_graph import KEY_STEP, PrefillGraphs, keys_read, rows_run
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
N_CTX = 80  # longer than a page (64 positions): kivi4 keys seal the first
# the same sums in another order (more keys, more rows) move a value by ~1e-7, which can flip
# how the cache rounds it (to f16, or to 4 bits) for the next layer: up to ~3e-4 of the logits
# measured; a padding row or slot seen would move them by ~1e-1
ATOL = 2e-3
TOKENS = [(37 * i * i + 5) % 300 for i in range(27)]


def test_keys_read_rounds_up_to_the_step_within_the_cache():
    assert keys_read(1, 10 * KEY_STEP) == KEY_STEP
    assert keys_read(KEY_STEP, 10 * KEY_STEP) == KEY_STEP
    assert keys_read(KEY_STEP + 1, 10 * KEY_STEP) == 2 * KEY_STEP
    assert keys_read(KEY_STEP + 1, KEY_STEP + 7) == KEY_STEP + 7


@pytest.mark.parametrize("kv", ["plain", "kivi4/f16"])
def test_chunks_as_a_graph_runs_them_give_the_logits_and_cache_of_exact_ones(kv, tmp_path):
    """Two chunks (5 tokens, then 20) as PrefillGraphs runs a shape's first chunk, the forward
    it captures next (padded to 16 and 32 rows, attending every slot of the cache: masked past
    each query's position), against the chunks run exactly; then decode steps, which overwrite
    the padding rows' slots before reading them: the same logits. The plain cache, and the
    paged one with kivi4 keys (its own page's rows exact, no padding rows where they would seal
    a page). The matrices in plain torch: the caches are what is tested (sinks, a sliding
    window and the other formats: test_gpu.py's graphs)."""
    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama", n_layer=2))
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), TorchOps(DEVICE))
    dims = dict(n_layer=2, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=N_CTX)

    def cache():
        if kv == "plain":
            return TorchKVCache(**dims, device=DEVICE)
        k_format, v_format = kv.split("/")
        return PagedCacheAdapter(**dims, device=DEVICE, k_format=k_format, v_format=v_format)

    exact, padded = cache(), PrefillGraphs(model, cache())  # on the CPU: first sights only
    kivi = kv == "kivi4/f16"
    assert rows_run(5, 0, padded.cache) == 16
    assert rows_run(20, 5, padded.cache) == 32
    # kivi4: rows 40..71 would seal the first page (slot 63) from padding rows
    assert rows_run(20, 40, padded.cache) == (20 if kivi else 32)
    assert rows_run(20, 60, padded.cache) == 20  # no room left for 32 rows
    assert rows_run(20, 5, padded.cache, max_rows=24) == 24  # chunks of 24: padded to 24
    for start, end in ((0, 5), (5, 25)):
        ids = torch.tensor(TOKENS[start:end], device=DEVICE)
        positions = torch.arange(start, end, device=DEVICE)
        expected = model.forward(ids, positions, exact, n_keys=end)
        got = padded.forward(ids, start)
        torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    for position in (25, 26):
        token, at = torch.tensor([TOKENS[position]], device=DEVICE), torch.tensor([position])
        expected = model.forward(token, at.to(DEVICE), exact, n_keys=N_CTX)
        got = model.forward(token, at.to(DEVICE), padded.cache, n_keys=N_CTX)
        torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
