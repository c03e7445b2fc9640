"""Every weight type of the two real small models (SmolLM2-135M Q4_1, Gemma 3 270M Q4_K_M),
as stored in their files, through quant_matmul against gguf's dequantizer. Gemma's rows of 640
are not whole K-quant super-blocks, so its file mixes in Q5_0 and Q8_0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kernels.gemv import float_config, quant_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import gemv
from tests.kernels.conftest import relative_error

ROWS = 16  # first rows of each tensor: all its block types, cheap in the interpreter


def _first_rows_per_type(path: Path) -> dict[str, tuple[str, int, np.ndarray, int]]:
    """type name -> (tensor name, row length, bytes of its first ROWS rows, rows) for the first
    2-D tensor of each type. Hearth's header reader, not gguf.GGUFReader, which takes tens of
    seconds over Gemma's 262,144-token vocabulary."""
    from engine.gguf import read_model_info

    info = read_model_info(path, deadline_s=30.0)
    found = {}
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=info.data_offset)
    for tensor in info.tensors:
        if len(tensor.shape) != 2 or tensor.type_name == "F32" or tensor.type_name in found:
            continue
        n_in, n_out = tensor.shape
        rows = min(ROWS, n_out)
        n_bytes = tensor.n_bytes // n_out * rows
        raw = np.array(data[tensor.offset : tensor.offset + n_bytes])
        found[tensor.type_name] = (tensor.name, n_in, raw, rows)
    return found


def _check_model(path: Path, device: str, expected_types: set[str]) -> None:
    tensors = _first_rows_per_type(path)
    assert expected_types <= set(tensors)
    for type_name, (name, n_in, raw, rows) in tensors.items():
        w = PackedWeight.from_gguf(raw, type_name, (rows, n_in), device=device)
        x = torch.randn(2, n_in)
        # the float path (x as it is): exact against the file's dequantized blocks; the integer
        # path's 8-bit x (Q4_K and Q6_K at up to DP4A_MAX_ROWS rows) is tested in
        # test_gemv_dp4a.py against its own bound
        y = quant_matmul(x.to(device), w, float_config(type_name, x.shape[0]))
        expected = gemv(x.numpy(), raw, type_name, (rows, n_in))
        assert relative_error(y.cpu(), expected) < 1e-5, f"{name} ({type_name})"


def test_starter_model_weights(starter_model, device):
    _check_model(starter_model, device, {"Q4_1", "Q8_0"})


def test_gemma_weights(gemma_model, device):
    _check_model(gemma_model, device, {"Q4_K", "Q6_K", "Q5_0", "Q8_0"})
