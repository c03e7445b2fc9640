"""GGUF tensors as torch tensors: blocks as stored, no copy, the right shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

from engine.gguf import read_model_info
from engine.hearth.host_dequant import dequantize
from engine.hearth.ops import TorchOps
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


def test_expert_tensors_are_views_of_their_blocks(tmp_path):
    """A 3-D expert tensor as stored: expert e is data[e], the same bytes as one matrix; expert
    biases come in torch order [n_expert, rows]."""
    from gguf.quants import dequantize

    from engine.gguf import read_model_info
    from engine.hearth.weights import GGUFTensors
    from tests.engine.hearth.tiny_models import QT, tiny_spec, write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "oss.gguf", tiny_spec("gpt-oss"))
    tensors = GGUFTensors(str(path), read_model_info(path))
    up = tensors.experts("blk.0.ffn_up_exps.weight")
    assert (up.n_expert, up.rows, up.cols, up.type_name) == (4, 64, 64, "MXFP4")
    assert up.data.shape == (4, 64, 64 // 32 * 17)
    one = up.expert(2)
    assert one.data.data_ptr() == up.data[2].data_ptr()  # a view, no copy
    whole = dequantize(up.data.numpy().reshape(4 * 64, -1), QT.MXFP4).reshape(4, 64, 64)
    part = dequantize(one.data.numpy(), QT.MXFP4)
    assert (part == whole[2]).all()
    assert tensors.float_tensor("blk.0.ffn_down_exps.bias").shape == (4, 64)
    tensors.close()
