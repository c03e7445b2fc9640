"""GGUF metadata value types and the bounded form in which arrays are kept.

Value type ids and sizes follow ggml/include/gguf.h (`enum gguf_type`) and the GGUF_TYPE_SIZE
table in ggml/src/gguf.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


VALUE_TYPE_COUNT = 13

# struct format characters of the fixed-size types (without byte order)
FIXED_FORMATS: dict[ValueType, str] = {
    ValueType.UINT8: "B",
    ValueType.INT8: "b",
    ValueType.UINT16: "H",
    ValueType.INT16: "h",
    ValueType.UINT32: "I",
    ValueType.INT32: "i",
    ValueType.FLOAT32: "f",
    ValueType.BOOL: "b",
    ValueType.UINT64: "Q",
    ValueType.INT64: "q",
    ValueType.FLOAT64: "d",
}
FIXED_SIZES: dict[ValueType, int] = {
    ValueType.UINT8: 1,
    ValueType.INT8: 1,
    ValueType.UINT16: 2,
    ValueType.INT16: 2,
    ValueType.UINT32: 4,
    ValueType.INT32: 4,
    ValueType.FLOAT32: 4,
    ValueType.BOOL: 1,
    ValueType.UINT64: 8,
    ValueType.INT64: 8,
    ValueType.FLOAT64: 8,
}
INTEGER_TYPES = frozenset(
    {
        ValueType.UINT8,
        ValueType.INT8,
        ValueType.UINT16,
        ValueType.INT16,
        ValueType.UINT32,
        ValueType.INT32,
        ValueType.UINT64,
        ValueType.INT64,
    }
)
FLOAT_TYPES = frozenset({ValueType.FLOAT32, ValueType.FLOAT64})

# Arrays up to this many elements are kept whole (per-layer arrays, tags, languages); longer ones
# (vocabularies, merges, scores) are kept as their type, length and place in the file.
INLINE_ARRAY_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class GGUFArray:
    """An array value from the metadata.

    `values` holds the elements when the array has at most INLINE_ARRAY_LIMIT of them, and is
    None otherwise: a 256k-entry vocabulary costs the reader a scan, not 256k Python objects.
    """

    element_type: ValueType
    length: int
    offset: int  # byte offset of the first element in the file
    nbytes: int  # bytes the elements take in the file
    values: tuple | None = None

    def __len__(self) -> int:
        return self.length

    @property
    def is_inline(self) -> bool:
        return self.values is not None

    def describe(self) -> str:
        return f"[{self.length} x {self.element_type.name.lower()}]"


MetadataValue = int | float | bool | str | GGUFArray


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """One key/value pair with where it sits in the file, for error messages that point at it."""

    key: str
    value_type: ValueType
    value: MetadataValue
    offset: int  # byte offset of the key's length field
