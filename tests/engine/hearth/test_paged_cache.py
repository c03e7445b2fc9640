"""engine.hearth.paged_cache: kernels' paged cache under the forward pass, against the plain
cache storing rows through kernels' numpy reference of the same formats, for what the engine
asks of it: a sliding window (Gemma 3), and a chat turn that drops the tail of the history."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (triton) is not installed", allow_module_level=True)

import torch

# Triton reads TRITON_INTERPRET when it is first imported (tests/kernels/conftest.py does the
# same); on a GPU it must stay unset, whatever imported triton first
if not torch.cuda.is_available():
    assert "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") is not None
    os.environ["TRITON_INTERPRET"] = "1"

from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import KernelsOps
from engine.hearth.paged_cache import PagedCacheAdapter
from engine.hearth.weights import GGUFTensors
from kernels.kv_formats import reference_kivi_pages, reference_roundtrip
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
N_CTX = 80


def _codec(fmt):
    """The format's numpy reference as a cache codec (rows come and go on their device)."""
    return lambda rows: torch.from_numpy(reference_roundtrip(fmt, rows.float().cpu().numpy())).to(
        rows.device
    )


def _model_and_caches(tmp_path, arch, k_format, v_format):
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=2))
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), KernelsOps(DEVICE))
    dims = dict(n_layer=2, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=N_CTX)
    simulated = TorchKVCache(
        **dims,
        device=DEVICE,
        dtype=torch.float32,
        k_codec=_codec(k_format),
        v_codec=_codec(v_format),
    )
    paged = PagedCacheAdapter(**dims, device=DEVICE, k_format=k_format, v_format=v_format)
    return model, config, {"simulated": simulated, "paged": paged}


def _run(model, cache, tokens, start, n_keys_decode, prefill=4):
    """A prefill of the first tokens, then one decode step per remaining token (tokens and
    positions on the model's device, as the engine passes them)."""
    ids = torch.tensor(tokens[:prefill], device=DEVICE)
    positions = torch.arange(start, start + prefill, device=DEVICE)
    out = [model.forward(ids, positions, cache, n_keys=start + prefill)]
    for i in range(prefill, len(tokens)):
        position = torch.tensor([start + i], device=DEVICE)
        token = torch.tensor([tokens[i]], device=DEVICE)
        out.append(model.forward(token, position, cache, n_keys=n_keys_decode))
    return torch.stack(out).float().cpu().numpy()


def test_sliding_window_layers_match_the_simulated_cache(tmp_path):
    """Gemma 3 (window 3 in the tiny model): prefill and decode steps far past the window."""
    model, config, caches = _model_and_caches(tmp_path, "gemma3", "q8", "rot4")
    assert config.swa_window == 3
    tokens = [5, 17, 300, 42, 0, 99, 7]  # decode steps at 4..6, each seeing only 3 positions
    rows = {name: _run(model, cache, tokens, 0, N_CTX) for name, cache in caches.items()}
    scale = np.abs(rows["simulated"]).max()
    np.testing.assert_allclose(rows["paged"], rows["simulated"], atol=1e-2 * scale)


def test_a_turn_that_edits_history_continues_after_truncate(tmp_path):
    """6 tokens, then back to 4 and three different ones (a prefill of two over the stale
    rows at 4 and 5, then a decode step)."""
    model, _config, caches = _model_and_caches(tmp_path, "llama", "rot4", "q8")
    rows = {}
    for name, cache in caches.items():
        _run(model, cache, [5, 17, 300, 42, 0, 99], 0, N_CTX)
        assert cache.truncate(4)
        rows[name] = _run(model, cache, [11, 12, 13], 4, N_CTX, prefill=2)
    scale = np.abs(rows["simulated"]).max()
    np.testing.assert_allclose(rows["paged"], rows["simulated"], atol=1e-2 * scale)


def test_kivi4_keys_match_a_cache_that_keeps_the_open_page_exact(tmp_path):
    """kivi4 K (pages of 64) under the forward pass: a prefill past the first page (sealed),
    then decode steps in the open page, against the plain cache that stores K through kivi4's
    reference and lets each query see its own page's keys and values exact. V q8: rot4's
    rotation, in f32 in the kernel and float64 in the reference, flips a code at a tie now
    and then (one step, up to 0.06 here), which this tiny random model amplifies past the
    tolerance over 69 positions."""
    from testkit.residual_cache import residual_cache

    path = write_tiny_gguf(tmp_path / "llama.gguf", tiny_spec("llama", n_layer=2))
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), KernelsOps(DEVICE))
    dims = dict(n_layer=2, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=N_CTX)
    kivi = lambda rows: torch.from_numpy(  # noqa: E731
        reference_kivi_pages(rows.float().cpu().numpy(), 64, rows.shape[0] // 64)
    ).to(rows.device)
    caches = {
        "simulated": residual_cache(
            64,
            True,
            device=DEVICE,
            dtype=torch.float32,
            k_codec=kivi,
            v_codec=_codec("q8"),
            **dims,
        ),
        "paged": PagedCacheAdapter(**dims, device=DEVICE, k_format="kivi4", v_format="q8"),
    }
    tokens = [(7 * i + 3) % 300 for i in range(69)]
    rows = {
        name: _run(model, cache, tokens, 0, N_CTX, prefill=66) for name, cache in caches.items()
    }
    scale = np.abs(rows["simulated"]).max()
    np.testing.assert_allclose(rows["paged"], rows["simulated"], atol=1e-2 * scale)


def test_attention_sinks_through_the_paged_cache():
    """gpt-oss's sinks: the paged cache (a prefill chunk gathered to f16 and attended in torch,
    a decode step through the decode kernel's reduce) gives what the plain f16 cache gives,
    with and without a window."""
    torch.manual_seed(0)
    dims = dict(n_layer=1, n_head_kv=2, head_dim=32, n_ctx=N_CTX)
    plain = TorchKVCache(**dims, device=DEVICE, dtype=torch.float16)
    paged = PagedCacheAdapter(**dims, device=DEVICE, k_format="f16", v_format="f16")
    k, v = torch.randn(6, 2, 32, device=DEVICE), torch.randn(6, 2, 32, device=DEVICE)
    q = torch.randn(6, 4, 32, device=DEVICE)
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], device=DEVICE)
    positions = torch.arange(6, device=DEVICE)
    for cache in (plain, paged):
        cache.write(0, positions, k, v)
    for window in (0, 3):
        for rows in (slice(0, 6), slice(5, 6)):  # a chunk, then one token
            got = [
                cache.attend(0, q[rows], positions[rows], 6, scale=0.25, window=window, sinks=sinks)
                for cache in (plain, paged)
            ]
            torch.testing.assert_close(got[1].float(), got[0].float(), atol=2e-3, rtol=2e-3)
    with_sinks = plain.attend(0, q, positions, 6, scale=0.25, sinks=sinks)
    without = plain.attend(0, q, positions, 6, scale=0.25)
    assert (with_sinks - without).abs().max() > 0.05  # the sinks do take a share


class _EachLayerItsMask:
    """The cache with the forward pass's per-chunk `masks` withheld, so every layer makes its
    own mask: the prefill as it was before a chunk's mask was shared by its layers."""

    def __init__(self, cache):
        self.cache = cache

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self.cache.write(layer, positions, k, v)

    def attend(self, layer, q, positions, n_keys, *, masks=None, **options):
        return self.cache.attend(layer, q, positions, n_keys, **options)


@pytest.fixture
def masks_made(monkeypatch):
    """Every prefill mask made (the paged cache's and the plain cache's), counted."""
    import kernels.prefill_masks

    made, make = [], kernels.prefill_masks.prefill_mask

    def counting(*args):
        made.append(args)
        return make(*args)

    monkeypatch.setattr(kernels.prefill_masks, "prefill_mask", counting)
    return made


@pytest.mark.parametrize(
    ("arch", "n_layer", "kind"),
    [("gemma3", 6, "q8/rot4"), ("llama", 2, "kivi4/q8"), ("gemma3", 6, "plain")],
    ids=["gemma3-windows-paged", "llama-kivi4", "gemma3-windows-plain"],
)
def test_a_chunked_prefill_gives_the_logits_of_a_mask_made_at_every_layer(
    tmp_path, arch, n_layer, kind, masks_made
):
    """Three chunks (5, 4 and 3 tokens): the logits of every row are those of the per-layer
    masks, bit for bit, and each chunk makes one mask per window (Gemma 3's five local layers
    of window 3 and its global one: two) instead of one per layer."""
    from engine.hearth.ops import TorchOps

    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch, n_layer=n_layer))
    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), TorchOps(DEVICE))
    dims = dict(n_layer=n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=16)
    windows = len({config.swa_window if config.is_swa(i) else 0 for i in range(n_layer)})
    tokens, logits, counts = [5, 17, 300, 42, 0, 99, 256, 7, 7, 123, 64, 11], {}, {}
    for way in ("shared", "each layer"):
        if kind == "plain":
            cache = TorchKVCache(**dims, device=DEVICE, dtype=torch.float32)
        else:
            k_format, v_format = kind.split("/")
            cache = PagedCacheAdapter(**dims, device=DEVICE, k_format=k_format, v_format=v_format)
        view = cache if way == "shared" else _EachLayerItsMask(cache)
        rows, start, before = [], 0, len(masks_made)
        for size in (5, 4, 3):
            ids = torch.tensor(tokens[start : start + size], device=DEVICE)
            positions = torch.arange(start, start + size, device=DEVICE)
            rows.append(model.forward(ids, positions, view, n_keys=start + size, all_logits=True))
            start += size
        logits[way], counts[way] = torch.cat(rows), len(masks_made) - before
    assert windows == (2 if arch == "gemma3" else 1)
    assert counts == {"shared": 3 * windows, "each layer": 3 * n_layer}
    assert torch.equal(logits["shared"], logits["each layer"])


@pytest.mark.parametrize(
    ("k_format", "v_format"), [("f16", "f16"), ("q8", "rot4"), ("kivi4", "rot4")]
)
def test_a_step_written_by_the_attention_gives_the_write_then_attend_bits(k_format, v_format):
    """attend_writing (a decode step's write and attention in one launch) against
    write_rotating then attend: the same output and stored rows, bit for bit, for f16
    queries (a GPU's activations), with biases, steps across a page start (kivi4: the page
    sealed at 63, the next opened at 64)."""
    import kernels

    gen = torch.Generator().manual_seed(3)
    n_q, n_kv, d = 4, 2, 32
    dims = dict(n_layer=1, n_head_kv=n_kv, head_dim=d, n_ctx=N_CTX)
    caches = [PagedCacheAdapter(**dims, device=DEVICE, k_format=k_format, v_format=v_format)
              for _ in range(2)]  # fmt: skip
    prefix = torch.randn(2, 62, n_kv, d, generator=gen).half().to(DEVICE)
    for cache in caches:
        cache.write(0, torch.arange(62, device=DEVICE), prefix[0], prefix[1])
    rope = kernels.Rope.from_gguf_params(d, d, 10000.0, layout="neox")
    biases = tuple(torch.randn(h * d, generator=gen).to(DEVICE) for h in (n_q, n_kv, n_kv))
    for position in (62, 63, 64):
        heads = (torch.randn(1, n_q + 2 * n_kv, d, generator=gen) * 2).half().to(DEVICE)
        q, k, v = heads[:, :n_q], heads[:, n_q : n_q + n_kv], heads[:, n_q + n_kv :]
        at = torch.tensor([position], device=DEVICE)
        rotated = caches[0].write_rotating(0, at, q, k, v, rope, biases=biases)
        apart = caches[0].attend(0, rotated, at, N_CTX, scale=0.2)
        together = caches[1].attend_writing(0, at, q, k, v, rope, biases=biases, scale=0.2)
        torch.testing.assert_close(together, apart, rtol=0, atol=0)
    stored = [cache.cache.read_rows(0, cache.seq) for cache in caches]
    for apart, together in zip(*stored, strict=True):
        np.testing.assert_array_equal(together, apart)


def test_attend_writing_declines_queries_not_in_f16():
    """Then the forward pass writes and attends in two calls: float32 queries would be rounded
    twice by the two calls (so not the same bits)."""
    import kernels

    dims = dict(n_layer=1, n_head_kv=2, head_dim=32, n_ctx=N_CTX)
    rope = kernels.Rope.from_gguf_params(32, layout="neox")
    at = torch.tensor([0], device=DEVICE)
    q, kv = torch.zeros(1, 4, 32, device=DEVICE), torch.zeros(1, 2, 32, device=DEVICE)
    plain = PagedCacheAdapter(**dims, device=DEVICE, k_format="f16", v_format="f16")
    assert plain.attend_writing(0, at, q, kv, kv, rope, scale=1.0) is None
