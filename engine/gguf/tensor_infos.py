"""Tensor infos: name, shape, ggml type and data offset of every tensor, validated.

The checks follow the tensor part of gguf_init_from_reader() in ggml/src/gguf.cpp: unique names
shorter than GGML_MAX_NAME, 1 to 4 dimensions (llama.cpp also accepts 0; we do not), none
negative, an element count that fits in int64 (computed exactly with Python ints), a known ggml
type whose block size divides the row length, and offsets that follow each other in order, each
padded to the alignment. Then every tensor's data must lie inside the file.
"""

from __future__ import annotations

from engine.gguf.cursor import Cursor
from engine.gguf.errors import GGUFError
from engine.gguf.ggml_types import ggml_type
from engine.gguf.model_info import TensorInfo

MAX_DIMS = 4  # ggml.h: GGML_MAX_DIMS
MAX_TENSOR_NAME = 63  # ggml.h: GGML_MAX_NAME is 64 including the terminating NUL
INT64_MAX = (1 << 63) - 1


def quote(text: str) -> str:
    """A key or tensor name as it appears in messages: quoted, escaped, not too long."""
    shown = text.encode("unicode_escape").decode("ascii")
    return f"'{shown[:80]}...'" if len(shown) > 80 else f"'{shown}'"


def pad(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def read_tensor_infos(cur: Cursor, n_tensors: int, alignment: int) -> tuple[TensorInfo, ...]:
    tensors: list[TensorInfo] = []
    seen: dict[str, int] = {}
    expected_offset = 0
    for i in range(n_tensors):
        info = _read_tensor_info(cur, i, seen, alignment, expected_offset)
        tensors.append(info)
        expected_offset += pad(info.n_bytes, alignment)
    return tuple(tensors)


def _read_tensor_info(
    cur: Cursor, i: int, seen: dict[str, int], alignment: int, expected_offset: int
) -> TensorInfo:
    name, name_offset = cur.read_name(f"tensor #{i} name", MAX_TENSOR_NAME, "name")
    if name in seen:
        raise GGUFError(
            f"tensor #{i} name {quote(name)}",
            name_offset,
            f"duplicates the name of tensor #{seen[name]}",
        )
    seen[name] = i
    what = f"tensor {quote(name)}"

    dims_offset = cur.pos
    n_dims = cur.read_u32(f"{what} n_dims")
    if not 1 <= n_dims <= MAX_DIMS:  # stricter: llama.cpp accepts n_dims 0
        raise GGUFError(f"{what} n_dims", dims_offset, f"{n_dims} is not in [1, {MAX_DIMS}]")
    shape = []
    for j in range(n_dims):
        dim_offset = cur.pos
        dim = cur.read_i64(f"{what} dimension {j}")
        if dim < 0:
            raise GGUFError(f"{what} dimension {j}", dim_offset, f"{dim} is negative")
        shape.append(dim)
    n_elements = 1
    for dim in shape:
        n_elements *= dim  # Python ints: exact, then checked against what ggml can hold
    if n_elements > INT64_MAX:
        raise GGUFError(
            f"{what} shape",
            dims_offset,
            f"{' x '.join(map(str, shape))} = {n_elements} elements overflows int64",
        )

    type_offset = cur.pos
    type_id = cur.read_i32(f"{what} ggml type")
    gtype = ggml_type(type_id)
    if gtype is None:
        raise GGUFError(f"{what} ggml type", type_offset, f"{type_id} is not a known ggml type")
    if shape[0] % gtype.block_size:
        raise GGUFError(
            f"{what} dimension 0",
            dims_offset + 4,
            f"{shape[0]} is not a multiple of the {gtype.name} block size {gtype.block_size}",
        )
    n_bytes = gtype.row_bytes(n_elements)
    if n_bytes > INT64_MAX:
        raise GGUFError(
            f"{what} shape", dims_offset, f"{n_bytes} bytes of {gtype.name} overflows int64"
        )

    offset_at = cur.pos
    offset = cur.read_u64(f"{what} offset")
    if offset % alignment:
        raise GGUFError(
            f"{what} offset",
            offset_at,
            f"{offset} is not a multiple of the alignment {alignment}",
        )
    if offset != expected_offset:
        raise GGUFError(
            f"{what} offset",
            offset_at,
            f"{offset} is out of sequence: tensors are stored in order, so it must be "
            f"{expected_offset}",
        )
    return TensorInfo(
        name=name,
        ggml_type=gtype.id,
        type_name=gtype.name,
        shape=tuple(shape),
        n_elements=n_elements,
        n_bytes=n_bytes,
        offset=offset,
        header_offset=name_offset,
    )


def check_data_in_file(cur: Cursor, tensors: tuple[TensorInfo, ...], data_offset: int) -> None:
    file_size = cur.file_size
    if tensors and data_offset > file_size:
        raise GGUFError(
            "tensor data",
            cur.pos,
            f"the data would start at byte {data_offset}, past the end of the file "
            f"at byte {file_size}",
        )
    for info in tensors:
        end = data_offset + info.offset + info.n_bytes
        if end > file_size:
            # the offset field is the last of the tensor info: name, n_dims, dims, type
            name_bytes = len(info.name.encode("utf-8"))
            offset_at = info.header_offset + 8 + name_bytes + 4 + 8 * len(info.shape) + 4
            raise GGUFError(
                f"tensor {quote(info.name)} offset",
                offset_at,
                f"its data ends at byte {end}, past the end of the file at byte {file_size} "
                "(an incomplete download?)",
            )
