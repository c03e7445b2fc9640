"""engine.hearth.prefill_graph on the CPU: what lets one captured chunk serve every chunk whose
keys fall in the same stretch, namely that attending slots past the chunk's last position
(masked) leaves its logits as they are, for each cache the worker prefills (the graphs
themselves are tested on a GPU: test_gpu.py)."""

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
from engine.hearth.prefill_graph import KEY_STEP, keys_read
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
N_CTX = 48
TOKENS = [5, 17, 300, 42, 0, 99, 256, 7, 7, 123]


def test_keys_read_rounds_up_to_the_step_within_the_cache():
    assert keys_read(1, 10 * KEY_STEP) == KEY_STEP
    assert keys_read(KEY_STEP, 10 * KEY_STEP) == KEY_STEP
    assert keys_read(KEY_STEP + 1, 10 * KEY_STEP) == 2 * KEY_STEP
    assert keys_read(KEY_STEP + 1, KEY_STEP + 7) == KEY_STEP + 7


@pytest.mark.parametrize(
    "arch, kv",
    [("llama", "plain"), ("gpt-oss", "plain"), ("llama", "q8/rot4"), ("llama", "kivi4/f16")],
    ids=["plain", "plain-sinks-swa", "paged-q8-rot4", "paged-kivi4"],
)
def test_chunks_that_read_masked_slots_past_their_end_give_the_same_logits(arch, kv, tmp_path):
    """Two chunks (5 tokens, then 5 more) attending exactly the written slots, and the same
    chunks attending every slot of the cache, as a graph of keys_read's count does: the same
    logits, and so the same K and V for the next chunk (gpt-oss: sinks and a sliding window).
    The matrices in plain torch: the caches' own kernels are what is tested."""
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=2))
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), TorchOps(DEVICE))
    dims = dict(n_layer=2, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=N_CTX)

    def cache():
        if kv == "plain":
            return TorchKVCache(**dims, device=DEVICE)
        k_format, v_format = kv.split("/")
        return PagedCacheAdapter(**dims, device=DEVICE, k_format=k_format, v_format=v_format)

    exact, padded = cache(), cache()
    for start, end in ((0, 5), (5, 10)):
        ids = torch.tensor(TOKENS[start:end], device=DEVICE)
        positions = torch.arange(start, end, device=DEVICE)
        expected = model.forward(ids, positions, exact, n_keys=end)
        got = model.forward(ids, positions, padded, n_keys=keys_read(end, N_CTX))
        torch.testing.assert_close(
            got, expected, rtol=0, atol=1e-4
        )  # f16 rows in SDPA, summed in another order
