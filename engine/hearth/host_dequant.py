"""Matrices as float32 on the host, through the `gguf` package's numpy dequantizers: the CPU
path's weights (TorchOps keeps them dequantized) and the oracle kernels/ is tested against."""

from __future__ import annotations

import numpy as np
import torch

from engine.hearth.weights import QuantWeight
from kernels.dequant_torch import MXFP4_TYPE, dequantize_mxfp4

# ggml type ids gguf.quants.dequantize handles, besides the plain float types.
DEQUANTIZABLE = {
    0: "F32",
    1: "F16",
    30: "BF16",
    2: "Q4_0",
    3: "Q4_1",
    6: "Q5_0",
    7: "Q5_1",
    8: "Q8_0",
    10: "Q2_K",
    11: "Q3_K",
    12: "Q4_K",
    13: "Q5_K",
    14: "Q6_K",
    # in torch (kernels/dequant_torch.py): gguf's numpy MXFP4 is newer than the gguf>=0.10 allowed
    39: "MXFP4",
}


def dequantize(w: QuantWeight, rows: np.ndarray | None = None) -> np.ndarray:
    """The matrix (or only `rows` of it) as float32, through the gguf package's dequantizers."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    data = w.data if w.data.device.type == "cpu" else w.data.cpu()
    if rows is not None:
        data = data[torch.as_tensor(rows, dtype=torch.long)]
    if w.is_float:
        return data.float().numpy()
    if w.ggml_type == MXFP4_TYPE:
        return dequantize_mxfp4(data, w.cols).numpy()
    return gguf_dequantize(data.numpy(), GGMLQuantizationType(w.ggml_type)).reshape(-1, w.cols)
