"""GGUF tensors as torch tensors: blocks as stored, no copy, the right shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

from engine.gguf import read_model_info
from engine.hearth.ops import TorchOps, dequantize
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    path = write_tiny_gguf(tmp_path_factory.mktemp("w") / "q.gguf", tiny_spec("qwen3"))
    return GGUFTensors(str(path), read_model_info(path))


def test_quantized_matrix_is_a_view_of_the_file(tensors):
    info = tensors.info.tensor("blk.0.attn_q.weight")
    w = tensors.matrix("blk.0.attn_q.weight")
    assert (w.type_name, w.rows, w.cols) == ("Q4_K", 256, 256)
    assert w.data.dtype == torch.uint8 and w.data.shape == (256, 256 // 256 * 144)
    assert w.nbytes == info.n_bytes
    with open(tensors.path, "rb") as f:
        f.seek(tensors.info.data_offset + info.offset)
        assert w.data.numpy().tobytes() == f.read(info.n_bytes)
    # no copy: the tensor's memory is the map's
    start = tensors.info.data_offset + info.offset
    assert w.data.data_ptr() == tensors._map[start:].ctypes.data


def test_f16_matrix_is_viewed_as_floats(tensors):
    w = tensors.matrix("blk.1.attn_output.weight")
    assert w.is_float and w.data.dtype == torch.float16 and w.data.shape == (256, 256)


def test_dequantize_rows_matches_the_whole_matrix(tensors):
    w = tensors.matrix("blk.2.ffn_gate.weight")
    whole = gguf_dequantize(w.data.numpy(), GGMLQuantizationType.Q4_K)
    np.testing.assert_array_equal(dequantize(w, np.array([7, 0, 511])), whole[[7, 0, 511]])


def test_vectors_are_float32(tensors):
    v = tensors.vector("blk.0.attn_q_norm.weight")
    assert v.dtype == torch.float32 and v.shape == (64,)
    assert tensors.optional_vector("blk.0.attn_q.bias") is None
    with pytest.raises(KeyError, match="no tensor nope"):
        tensors.matrix("nope")


def test_unsupported_type_is_named():
    ops = TorchOps()
    from engine.hearth.weights import QuantWeight

    iq = QuantWeight("blk.0.attn_q.weight", 16, 4, 256, torch.zeros(4, 66, dtype=torch.uint8))
    with pytest.raises(ValueError, match="IQ2_XXS is not supported"):
        ops.prepare(iq)
