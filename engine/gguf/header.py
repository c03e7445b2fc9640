"""Parse and validate a GGUF header: magic, version, key/value metadata, then the tensor
infos (engine.gguf.tensor_infos).

The checks follow gguf_init_from_reader() in the vendored ggml/src/gguf.cpp and add a few of
our own (marked "stricter" below): every rule llama.cpp enforces, a malformed file also fails
here, with a GGUFError naming the field and its byte offset. Tensor data is never read.

Layout (all integers in the file's byte order, little-endian unless the version says otherwise):
    magic "GGUF" | u32 version | i64 n_tensors | i64 n_kv
    n_kv x (string key | i32 value type | value)
    n_tensors x (string name | u32 n_dims | n_dims x i64 ne | i32 ggml type | u64 offset)
    padding to `general.alignment` | tensor data
where a string is a u64 byte length and that many bytes, and an array value is an i32 element
type, a u64 count and the elements.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from engine.gguf.cursor import Cursor
from engine.gguf.errors import GGUFError
from engine.gguf.model_info import TensorInfo
from engine.gguf.tensor_infos import check_data_in_file, pad, quote, read_tensor_infos
from engine.gguf.values import (
    FIXED_FORMATS,
    FIXED_SIZES,
    INLINE_ARRAY_LIMIT,
    VALUE_TYPE_COUNT,
    GGUFArray,
    MetadataEntry,
    MetadataValue,
    ValueType,
)

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32  # gguf.h: GGUF_DEFAULT_ALIGNMENT
MAX_ALIGNMENT = 64 * 1024  # stricter: llama.cpp only asks for a power of two

# Stricter than llama.cpp, whose limits (1 GiB strings, 2^30 array elements) exist to stop
# overflow, not to bound memory. Real files are far inside these.
MAX_KEY_BYTES = 4096
MAX_STRING_BYTES = 16 * 1024 * 1024
MAX_ARRAY_STRING_BYTES = 1024 * 1024
MAX_ARRAY_ELEMENTS = 1 << 26
MAX_KV_COUNT = 1 << 16
MAX_TENSOR_COUNT = 1 << 17
INLINE_ELEMENT_BUDGET = 1 << 18  # array elements kept as Python objects, over the whole header

# Smallest possible encodings, used to bound counts by the bytes left before reading them.
MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, 1-byte key, value type, u8 value
# name length, 1-byte name, n_dims, ne[0], ggml type, offset
MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8
STRING_INDEX_EVERY = 1024  # for long string arrays, keep the offset of every 1024th string


@dataclass(slots=True)
class RawHeader:
    version: int
    byte_order: str  # "little" or "big"
    metadata: dict[str, MetadataEntry]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    header_end: int  # end of the tensor infos: all a reader of the header needs to fetch
    data_offset: int  # start of the tensor data
    file_size: int
    # offsets of every STRING_INDEX_EVERY-th string of each long string array, by key
    string_indexes: dict[str, list[int]] = field(default_factory=dict)


class HeaderParser:
    def __init__(self, cursor: Cursor) -> None:
        self.cur = cursor
        self._inline_budget = INLINE_ELEMENT_BUDGET
        self._string_indexes: dict[str, list[int]] = {}

    # -- top level --------------------------------------------------------------------------

    def parse(self) -> RawHeader:
        cur = self.cur
        magic = cur.take(4, "magic")
        if magic != MAGIC:
            raise GGUFError(
                "magic",
                0,
                f"it begins with {shown_bytes(magic)}, not “GGUF” as every GGUF file does",
            )
        version, byte_order = self._read_version()
        n_tensors = cur.read_i64("tensor count")
        n_kv = cur.read_i64("metadata key count")
        self._check_counts(n_tensors, n_kv)

        metadata: dict[str, MetadataEntry] = {}
        for i in range(n_kv):
            entry = self._read_kv(i, metadata)
            metadata[entry.key] = entry
        alignment = self._alignment(metadata)

        tensors = read_tensor_infos(cur, n_tensors, alignment)
        header_end = cur.pos
        data_offset = pad(header_end, alignment) if n_tensors else header_end
        check_data_in_file(cur, tensors, data_offset)
        return RawHeader(
            version=version,
            byte_order=byte_order,
            metadata=metadata,
            tensors=tensors,
            alignment=alignment,
            header_end=header_end,
            data_offset=data_offset,
            file_size=cur.file_size,
            string_indexes=self._string_indexes,
        )

    def array_string(self, raw: RawHeader, key: str, item: int) -> str | None:
        """Item `item` of the long string array `key` (while the header bytes are at hand)."""
        entry = raw.metadata.get(key)
        if entry is None or not isinstance(entry.value, GGUFArray):
            return None
        array = entry.value
        if array.element_type != ValueType.STRING or not 0 <= item < array.length:
            return None
        if array.values is not None:
            return array.values[item]
        index = raw.string_indexes[key]
        data = self.cur.string_at(index, STRING_INDEX_EVERY, item, MAX_ARRAY_STRING_BYTES)
        return data.decode("utf-8", errors="replace")

    # -- fixed header -----------------------------------------------------------------------

    def _read_version(self) -> tuple[int, str]:
        raw = self.cur.take(4, "version")
        little = struct.unpack("<I", raw)[0]
        big = struct.unpack(">I", raw)[0]
        if little in SUPPORTED_VERSIONS:
            return little, "little"
        if big in SUPPORTED_VERSIONS:
            self.cur.set_byte_order(">")
            return big, "big"
        if little == 0:
            detail = "version 0 is not a GGUF version"
        elif little == 1:
            detail = "GGUF version 1 is no longer supported; convert the model again"
        else:
            detail = f"version {little} is not supported (Hearth reads GGUF versions 2 and 3)"
        raise GGUFError("version", 4, detail)

    def _check_counts(self, n_tensors: int, n_kv: int) -> None:
        left = self.cur.bytes_left(24)
        phrase = self.cur.left_phrase(24).removeprefix("only ")
        if n_tensors < 0 or n_tensors > MAX_TENSOR_COUNT:
            raise GGUFError("tensor count", 8, f"{n_tensors} is not in [0, {MAX_TENSOR_COUNT}]")
        if n_tensors * MIN_TENSOR_INFO_BYTES > left:
            raise GGUFError("tensor count", 8, f"{n_tensors} tensor infos cannot fit: {phrase}")
        if n_kv < 0 or n_kv > MAX_KV_COUNT:
            raise GGUFError("metadata key count", 16, f"{n_kv} is not in [0, {MAX_KV_COUNT}]")
        if n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_INFO_BYTES > left:
            raise GGUFError(
                "metadata key count",
                16,
                f"{n_kv} key/value pairs and {n_tensors} tensor infos cannot fit: {phrase}",
            )

    # -- metadata ---------------------------------------------------------------------------

    def _read_kv(self, i: int, seen: dict[str, MetadataEntry]) -> MetadataEntry:
        cur = self.cur
        key, key_offset = cur.read_name(f"metadata key #{i}", MAX_KEY_BYTES, "key")
        if key in seen:
            raise GGUFError(
                f"metadata key #{i} {quote(key)}",
                key_offset,
                f"duplicates the key at byte {seen[key].offset}",
            )
        value_type = self._read_value_type(f"metadata {quote(key)} value type")
        if value_type == ValueType.ARRAY:
            value: MetadataValue = self._read_array(key)
        else:
            value = self._read_scalar(key, value_type)
        return MetadataEntry(key, value_type, value, key_offset)

    def _read_value_type(self, what: str) -> ValueType:
        offset = self.cur.pos
        type_id = self.cur.read_i32(what)
        if not 0 <= type_id < VALUE_TYPE_COUNT:
            raise GGUFError(what, offset, f"{type_id} is not a GGUF value type (0..12)")
        return ValueType(type_id)

    def _read_scalar(self, key: str, value_type: ValueType) -> MetadataValue:
        cur = self.cur
        what = f"metadata {quote(key)}"
        if value_type == ValueType.STRING:
            data, _ = cur.read_string_bytes(what, MAX_STRING_BYTES)
            return data.decode("utf-8", errors="replace")
        st = struct.Struct(cur.byte_order + FIXED_FORMATS[value_type])
        value = cur.unpack(st, what)
        return value != 0 if value_type == ValueType.BOOL else value

    def _read_array(self, key: str) -> GGUFArray:
        cur = self.cur
        what = f"metadata {quote(key)}"
        element_type = self._read_value_type(f"{what} array element type")
        if element_type == ValueType.ARRAY:
            raise GGUFError(f"{what} array element type", cur.pos - 4, "nested arrays")
        length_offset = cur.pos
        length = cur.read_u64(f"{what} array length")
        element_min = 8 if element_type == ValueType.STRING else FIXED_SIZES[element_type]
        left = cur.bytes_left(cur.pos)
        if length > MAX_ARRAY_ELEMENTS:
            raise GGUFError(
                f"{what} array length", length_offset, f"{length} is over {MAX_ARRAY_ELEMENTS}"
            )
        if length * element_min > left:
            raise GGUFError(
                f"{what} array length",
                length_offset,
                f"{length} elements need at least {length * element_min} bytes, "
                f"but {cur.left_phrase(cur.pos)}",
            )
        start = cur.pos
        inline = length <= INLINE_ARRAY_LIMIT and length <= self._inline_budget
        if inline:
            self._inline_budget -= length
        if element_type == ValueType.STRING:
            values = self._read_string_elements(key, what, length, inline)
        else:
            values = self._read_fixed_elements(what, element_type, length, inline)
        return GGUFArray(element_type, length, start, cur.pos - start, values)

    def _read_fixed_elements(
        self, what: str, element_type: ValueType, length: int, inline: bool
    ) -> tuple | None:
        cur = self.cur
        size = FIXED_SIZES[element_type] * length
        start = cur.pos
        cur.ensure(start + size, what, start)
        cur.pos = start + size
        if not inline:
            return None
        fmt = f"{cur.byte_order}{length}{FIXED_FORMATS[element_type]}"
        values = struct.unpack_from(fmt, cur.buf, start)
        if element_type == ValueType.BOOL:
            return tuple(v != 0 for v in values)
        return values

    def _read_string_elements(self, key: str, what: str, length: int, inline: bool) -> tuple | None:
        cur = self.cur
        if inline:
            items = []
            for j in range(length):
                data, _ = cur.read_string_bytes(f"{what} element #{j}", MAX_ARRAY_STRING_BYTES)
                items.append(data.decode("utf-8", errors="replace"))
            return tuple(items)
        self._string_indexes[key] = cur.skip_strings(
            length, what, MAX_ARRAY_STRING_BYTES, STRING_INDEX_EVERY
        )
        return None

    def _alignment(self, metadata: dict[str, MetadataEntry]) -> int:
        entry = metadata.get("general.alignment")
        if entry is None:
            return DEFAULT_ALIGNMENT
        what = "metadata 'general.alignment'"
        if entry.value_type != ValueType.UINT32:
            raise GGUFError(what, entry.offset, f"must be a uint32, not {entry.value_type.name}")
        alignment = entry.value
        assert isinstance(alignment, int)
        if alignment == 0 or alignment & (alignment - 1):
            raise GGUFError(what, entry.offset, f"{alignment} is not a power of two")
        if alignment > MAX_ALIGNMENT:
            raise GGUFError(what, entry.offset, f"{alignment} is over {MAX_ALIGNMENT}")
        return alignment


def shown_bytes(data: bytes) -> str:
    """Bytes as a person reads them: “text” when printable, else hex (never Python's b'...')."""
    if data and all(32 <= byte < 127 for byte in data):
        return f"“{data.decode('ascii')}”"
    if not data:
        return "nothing"
    return "the bytes " + " ".join(f"{byte:02X}" for byte in data)
