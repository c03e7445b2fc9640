"""The forward pass against the plain reference (engine/hearth/reference.py) on tiny models:
prefill in uneven chunks, then one token at a time over the whole preallocated cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import TorchOps
from engine.hearth.reference import reference_logits
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

TOKENS = [5, 17, 300, 42, 0, 99, 256, 7, 7, 123, 64, 11]
CHUNKS = (4, 1, 3)  # then one token at a time
N_CTX = 32

CASES = {
    "llama": tiny_spec("llama"),
    "llama-rope-factors-linear-scaling": tiny_spec("llama", rope_freq_factors=True, rope_scale=2.0),
    "qwen2": tiny_spec("qwen2"),
    "qwen3": tiny_spec("qwen3"),
    "gemma3": tiny_spec("gemma3"),
    "qwen3moe": tiny_spec("qwen3moe"),
    "qwen2moe-shared-expert": tiny_spec("qwen2moe"),
    "gpt-oss-mxfp4-sinks-yarn-swa": tiny_spec("gpt-oss"),
    "llama-moe": tiny_spec("llama-moe"),
}


def run_engine(path, cache_dtype=torch.float32, ops=None) -> np.ndarray:
    """Logits of every position from the engine: chunked prefill, then decode steps."""
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), ops or TorchOps("cpu"))
    cache = TorchKVCache(
        n_layer=config.n_layer,
        n_head_kv=config.n_head_kv,
        head_dim=config.head_dim,
        n_ctx=N_CTX,
        dtype=cache_dtype,
    )
    rows, start = [], 0
    for size in CHUNKS:
        chunk = TOKENS[start : start + size]
        positions = torch.arange(start, start + size)
        rows.append(
            model.forward(
                torch.tensor(chunk), positions, cache, n_keys=start + size, all_logits=True
            )
        )
        start += size
    for pos in range(start, len(TOKENS)):
        # a decode step: the cache's full length, unwritten slots masked by position
        logits = model.forward(
            torch.tensor([TOKENS[pos]]), torch.tensor([pos]), cache, n_keys=N_CTX
        )
        rows.append(logits[None])
    return torch.cat(rows).numpy()


@pytest.fixture(scope="module", params=list(CASES))
def tiny_model(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / f"{request.param}.gguf"
    return write_tiny_gguf(path, CASES[request.param])


def test_engine_matches_the_reference(tiny_model):
    info = read_model_info(tiny_model)
    config = model_config(info)
    expected = reference_logits(config, GGUFTensors(str(tiny_model), info), TOKENS)
    got = run_engine(tiny_model)
    assert got.shape == expected.shape == (len(TOKENS), config.n_vocab)
    spread = expected.std()
    assert spread > 0.1  # the logits say something: a broken model would not show here
    np.testing.assert_allclose(got, expected, atol=2e-4 * max(1.0, np.abs(expected).max()))


def test_f16_cache_stays_close(tiny_model):
    """llama.cpp's default cache type: keys and values rounded to f16 move logits a little."""
    exact = run_engine(tiny_model)
    half = run_engine(tiny_model, cache_dtype=torch.float16)
    assert np.abs(half - exact).max() < 0.02 * max(1.0, np.abs(exact).max())
    assert not np.array_equal(half, exact)  # the f16 cache is really used


def test_a_bias_keeps_the_activations_dtype():
    """An f16 product plus a float32 bias (gpt-oss's attention output bias) stays f16, the sum
    in float32 rounded once: a promoted float32 output would carry float32 through every later
    layer (and a conversion launch before and after each attention)."""
    from engine.hearth.attention_block import add_bias

    gen = torch.Generator().manual_seed(0)
    y = torch.randn(2, 64, generator=gen).half()
    bias = torch.randn(64, generator=gen)
    want = (y.float() + bias).half()
    got = add_bias(y.clone(), bias)
    assert got.dtype == torch.float16 and torch.equal(got, want)
    assert add_bias(y, None) is y


@pytest.mark.parametrize(
    ("normed", "n_head", "n_head_kv", "writes"),
    [
        (False, 32, 8, True),  # Llama-3-8B: measured faster
        (False, 24, 8, True),  # Llama-3.2-3B
        (False, 64, 8, False),  # gpt-oss-20b: measured slower
        (True, 32, 4, False),  # Qwen3-30B-A3B: measured slower
        (True, 8, 4, False),  # head norms, whatever the group
    ],
)
def test_which_steps_write_their_row_in_the_attention_launch(normed, n_head, n_head_kv, writes):
    """attention_block.writes_in_attention: a step writes its K/V row in the attention's
    launch where that was measured faster (no head norms, at most 4 query heads a KV head),
    else through the write's own launch."""
    from types import SimpleNamespace

    from engine.hearth.attention_block import writes_in_attention

    norm = torch.ones(4) if normed else None
    layer = SimpleNamespace(q_norm=norm, k_norm=norm)
    config = SimpleNamespace(n_head=n_head, n_head_kv=n_head_kv)
    assert writes_in_attention(layer, config) is writes
