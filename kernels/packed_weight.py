"""A GGUF weight on the GPU, split once into planes of its block fields (see ggml_formats)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kernels.errors import UnsupportedTensor
from kernels.ggml_formats import BlockFormat, block_format, check_shape

_TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int32": torch.int32,
}


@dataclass(frozen=True)
class PackedWeight:
    fmt: BlockFormat
    n_out: int
    n_in: int
    planes: dict[str, torch.Tensor]  # field name -> [n_out, blocks * field elements]

    @classmethod
    def from_gguf(
        cls, raw: object, ggml_type: object, shape: tuple[int, int], device: object = "cuda"
    ) -> PackedWeight:
        """raw: the tensor's bytes as stored; shape: (n_out, n_in), GGUF's ne reversed."""
        fmt = block_format(ggml_type)
        n_out, n_in = (int(s) for s in shape)
        check_shape(fmt, (n_out, n_in))
        data = _as_uint8_tensor(raw)
        blocks = n_in // fmt.block_size
        expected = n_out * blocks * fmt.type_size
        if data.numel() != expected:
            raise UnsupportedTensor(
                f"{fmt.name} tensor of shape {(n_out, n_in)} needs {expected} bytes, "
                f"got {data.numel()}"
            )
        records = data.to(device).reshape(n_out, blocks, fmt.type_size)
        planes = {}
        for name, offset, length, dtype in fmt.fields:
            field = records[:, :, offset : offset + length].contiguous()
            planes[name] = field.view(_TORCH_DTYPES[dtype]).reshape(n_out, -1)
        return cls(fmt, n_out, n_in, planes)

    @property
    def nbytes(self) -> int:
        """Bytes the GEMV must read: the same count as the GGUF tensor."""
        return sum(p.numel() * p.element_size() for p in self.planes.values())

    @property
    def device(self) -> torch.device:
        return next(iter(self.planes.values())).device

    def dequantize(self) -> torch.Tensor:
        """float32 [n_out, n_in] through gguf's numpy dequantizer (slow: for checks, not use)."""
        from kernels.reference import dequantize_weight

        values = dequantize_weight(self.to_gguf_bytes(), self.fmt.name, (self.n_out, self.n_in))
        return torch.from_numpy(values).to(self.device)

    def to_gguf_bytes(self) -> np.ndarray:
        """The original blocks again (for checks against gguf.quants.dequantize)."""
        blocks = self.n_in // self.fmt.block_size
        out = torch.empty(self.n_out, blocks, self.fmt.type_size, dtype=torch.uint8)
        for name, offset, length, _ in self.fmt.fields:
            plane = self.planes[name].cpu().contiguous().view(torch.uint8)
            out[:, :, offset : offset + length] = plane.reshape(self.n_out, blocks, length)
        return out.numpy().reshape(-1)


def _as_uint8_tensor(raw: object) -> torch.Tensor:
    if isinstance(raw, torch.Tensor):
        return raw.reshape(-1).view(torch.uint8) if raw.dtype != torch.uint8 else raw.reshape(-1)
    if isinstance(raw, bytes | bytearray | memoryview):
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    if isinstance(raw, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(raw).reshape(-1).view(np.uint8))
    raise UnsupportedTensor(f"weight bytes of type {type(raw).__name__}: pass bytes or an array")
