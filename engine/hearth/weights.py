"""A GGUF's tensors as torch tensors, quantized blocks kept exactly as the file stores them.

The file is memory-mapped (copy-on-write, so torch may wrap it without a copy); each matrix
becomes a `QuantWeight` whose `data` is a view into the map: uint8 rows of ggml blocks for
quantized types, or the float matrix itself for F32/F16/BF16. Nothing is dequantized here, so
loading costs what reading the file costs and no f16 copy of the model is ever made. Moving a
weight to a GPU copies its blocks as they are (`to(device)`); the kernels behind engine.hearth.ops
read them there. Vectors (norm weights, biases, RoPE frequency factors) are small and become
float32.

Mixture-of-experts layers store each expert matrix kind as one 3-D tensor, ggml shape
[n_in, n_out, n_expert]: `experts(name)` gives it as a `QuantExperts`, the blocks of expert e
being `data[e]` (the same [rows, row_bytes] as one matrix), so an expert is a view, never a copy.

Offsets, shapes and types come from Hearth's own bounded reader (engine.gguf), which has already
checked that every tensor lies inside the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from engine.gguf import ModelInfo, TensorInfo
from engine.gguf.ggml_types import GGML_TYPES
from engine.hearth.upload import FileUploader

# ggml type ids whose elements are plain numbers, and their torch dtypes
_FLOAT_TYPES = {0: torch.float32, 1: torch.float16, 30: torch.bfloat16}


@dataclass(frozen=True)
class QuantWeight:
    """A [rows, cols] matrix (torch order: out_features x in_features) as stored in the GGUF."""

    name: str
    ggml_type: int
    rows: int
    cols: int
    data: torch.Tensor  # uint8 [rows, row_bytes] of blocks, or the float matrix [rows, cols]

    @property
    def type_name(self) -> str:
        return GGML_TYPES[self.ggml_type].name

    @property
    def is_float(self) -> bool:
        return self.ggml_type in _FLOAT_TYPES

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def to(self, device: torch.device | str) -> QuantWeight:
        return QuantWeight(self.name, self.ggml_type, self.rows, self.cols, self.data.to(device))


@dataclass(frozen=True)
class QuantExperts:
    """[n_expert, rows, cols] expert matrices as stored: `data` is uint8 [n_expert, rows,
    row_bytes] of blocks, or the float matrices [n_expert, rows, cols]."""

    name: str
    ggml_type: int
    n_expert: int
    rows: int
    cols: int
    data: torch.Tensor

    @property
    def type_name(self) -> str:
        return GGML_TYPES[self.ggml_type].name

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def expert(self, e: int) -> QuantWeight:
        """Expert e's matrix, a view of its blocks."""
        return QuantWeight(f"{self.name}[{e}]", self.ggml_type, self.rows, self.cols, self.data[e])

    def to(self, device: torch.device | str) -> QuantExperts:
        return QuantExperts(
            self.name, self.ggml_type, self.n_expert, self.rows, self.cols, self.data.to(device)
        )


class GGUFTensors:
    """The tensors of one GGUF file, memory-mapped; look them up by name."""

    def __init__(self, path: str, info: ModelInfo):
        self.path = path
        self.info = info
        # mode "c": a private mapping, writable as far as numpy knows (torch.from_numpy refuses
        # read-only arrays) while the file itself can never be written through it.
        self._map = np.memmap(path, dtype=np.uint8, mode="c")
        self._by_name = {t.name: t for t in info.tensors}
        self._upload: FileUploader | None = None

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def _bytes(self, t: TensorInfo) -> torch.Tensor:
        start = self.info.data_offset + t.offset
        return torch.from_numpy(self._map[start : start + t.n_bytes])

    def _raw(self, t: TensorInfo, device: torch.device | str | None) -> torch.Tensor:
        """The tensor's bytes, on `device` if given (a GPU's through the pinned buffers)."""
        uploader = self._uploader(device)
        if uploader is not None:
            return uploader.read(self.info.data_offset + t.offset, t.n_bytes)
        raw = self._bytes(t)
        return raw if device is None else raw.to(device)

    def matrix(self, name: str, device: torch.device | str | None = None) -> QuantWeight:
        """The matrix as stored, mapped from the file; with a GPU `device`, on that GPU, read
        there through pinned buffers (engine/hearth/upload.py; plan_uploads() before the first,
        finish_uploads() after the last). HEARTH_UPLOAD=pageable copies through `to(device)`
        instead."""
        t = self._require(name)
        if len(t.shape) != 2:
            raise ValueError(f"tensor {name} has shape {t.shape}, not a matrix")
        cols, rows = t.shape  # ggml order: the row length first
        raw = self._raw(t, device)
        dtype = _FLOAT_TYPES.get(t.ggml_type)
        data = raw.view(dtype).view(rows, cols) if dtype else raw.view(rows, -1)
        return QuantWeight(name, t.ggml_type, rows, cols, data)

    def experts(self, name: str, device: torch.device | str | None = None) -> QuantExperts:
        """A 3-D expert tensor as stored (see the module docstring), on `device` if given
        (a GPU's through the pinned buffers, as `matrix`)."""
        t = self._require(name)
        if len(t.shape) != 3:
            raise ValueError(f"tensor {name} has shape {t.shape}, not [n_in, n_out, experts]")
        cols, rows, n_expert = t.shape
        raw = self._raw(t, device)
        dtype = _FLOAT_TYPES.get(t.ggml_type)
        data = raw.view(dtype).view(n_expert, rows, cols) if dtype else raw.view(n_expert, rows, -1)
        return QuantExperts(name, t.ggml_type, n_expert, rows, cols, data)

    def float_tensor(self, name: str) -> torch.Tensor:
        """A float tensor of any rank as float32, in torch order (ggml's shape reversed): e.g.
        an expert bias [n_expert, n_out]."""
        t = self._require(name)
        dtype = _FLOAT_TYPES.get(t.ggml_type)
        if dtype is None:
            raise ValueError(f"tensor {name} ({t.type_name}) is not stored as floats")
        return self._bytes(t).view(dtype).float().view(*reversed(t.shape))

    def optional_float_tensor(self, name: str) -> torch.Tensor | None:
        return self.float_tensor(name) if name in self else None

    def plan_uploads(self, names: list[str], device: torch.device | str) -> None:
        """Say which tensors the next `matrix` / `experts` calls for `device` ask for, in that
        order (names the file lacks are left out): the pinned readers start on them at once
        and stay ahead of the calls (engine/hearth/upload.py). Calls in another order still
        get their bytes, read when asked."""
        if not self.uploads_to(device):
            return
        self.finish_uploads()
        found = [self._by_name[n] for n in names if n in self._by_name]
        plan = [(self.info.data_offset + t.offset, t.n_bytes) for t in found]
        self._upload = FileUploader(self.path, device, plan=plan)

    @staticmethod
    def uploads_to(device: torch.device | str | None) -> bool:
        """Whether tensors for `device` go through the pinned uploader: a GPU's do (unless
        HEARTH_UPLOAD=pageable); the CPU reads the mapped file in place."""
        if device is None or torch.device(device).type != "cuda":
            return False
        return os.environ.get("HEARTH_UPLOAD", "") != "pageable"

    def _uploader(self, device: torch.device | str | None) -> FileUploader | None:
        if not self.uploads_to(device):
            return None
        if self._upload is None or self._upload.device != torch.device(device):
            self.finish_uploads()
            self._upload = FileUploader(self.path, device)
        return self._upload

    def finish_uploads(self) -> None:
        """Wait for the GPU copies in flight and give the pinned buffers back."""
        if self._upload is not None:
            self._upload.close()
            self._upload = None

    def vector(self, name: str) -> torch.Tensor:
        """A 1-D tensor (norm weight, bias, frequency factors) as float32."""
        t = self._require(name)
        dtype = _FLOAT_TYPES.get(t.ggml_type)
        if len(t.shape) != 1 or dtype is None:
            raise ValueError(f"tensor {name} ({t.type_name}, {t.shape}) is not a float vector")
        return self._bytes(t).view(dtype).float()

    def optional_vector(self, name: str) -> torch.Tensor | None:
        return self.vector(name) if name in self else None

    def _require(self, name: str) -> TensorInfo:
        t = self._by_name.get(name)
        if t is None:
            raise KeyError(f"the model file has no tensor {name}")
        return t

    def close(self) -> None:
        self.finish_uploads()
        mapping = getattr(self._map, "_mmap", None)
        self._map = None  # views handed out keep the map alive until they are dropped
        del mapping
