"""ggml tensor types and llama.cpp file types, as the vendored llama.cpp defines them.

Sources (llama-cpp-python 0.3.36, vendor/llama.cpp):
- ggml/include/ggml.h, `enum ggml_type`: the numeric ids. Ids 4, 5, 31-33 and 36-38 were
  removed from the format; ggml.c gives them block size 0 and gguf.cpp rejects them, as we do.
- ggml/src/ggml.c, `type_traits[]`: elements per block (`blck_size`) and bytes per block
  (`type_size`, the `sizeof(block_*)` that ggml/src/ggml-common.h pins with static_asserts).
- include/llama.h, `enum llama_ftype`: `general.file_type`, the "mostly" quantization of a file.

Note Q8_1: ggml-common.h makes it 2*sizeof(ggml_half) + 32 = 36 bytes; the `gguf` Python package
0.19.0 still says 40 (an older layout). No shipped model stores Q8_1 tensors; we follow ggml.
"""

from __future__ import annotations

from dataclasses import dataclass

QK_K = 256  # elements in a k-quant super-block


@dataclass(frozen=True, slots=True)
class GGMLType:
    id: int
    name: str
    block_size: int  # elements per block
    type_size: int  # bytes per block

    def row_bytes(self, n_elements: int) -> int:
        """Bytes taken by `n_elements` elements; `n_elements` must be a whole number of blocks."""
        return n_elements // self.block_size * self.type_size

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size


_TYPES = (
    GGMLType(0, "F32", 1, 4),
    GGMLType(1, "F16", 1, 2),
    GGMLType(2, "Q4_0", 32, 2 + 16),
    GGMLType(3, "Q4_1", 32, 2 * 2 + 16),
    GGMLType(6, "Q5_0", 32, 2 + 4 + 16),
    GGMLType(7, "Q5_1", 32, 2 * 2 + 4 + 16),
    GGMLType(8, "Q8_0", 32, 2 + 32),
    GGMLType(9, "Q8_1", 32, 2 * 2 + 32),
    GGMLType(10, "Q2_K", QK_K, 2 * 2 + QK_K // 16 + QK_K // 4),
    GGMLType(11, "Q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    GGMLType(12, "Q4_K", QK_K, 2 * 2 + 12 + QK_K // 2),
    GGMLType(13, "Q5_K", QK_K, 2 * 2 + 12 + QK_K // 2 + QK_K // 8),
    GGMLType(14, "Q6_K", QK_K, 2 + QK_K // 16 + 3 * QK_K // 4),
    GGMLType(15, "Q8_K", QK_K, 4 + QK_K + QK_K // 16 * 2),
    GGMLType(16, "IQ2_XXS", QK_K, 2 + QK_K // 8 * 2),
    GGMLType(17, "IQ2_XS", QK_K, 2 + QK_K // 8 * 2 + QK_K // 32),
    GGMLType(18, "IQ3_XXS", QK_K, 2 + 3 * (QK_K // 8)),
    GGMLType(19, "IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),
    GGMLType(20, "IQ4_NL", 32, 2 + 16),
    GGMLType(21, "IQ3_S", QK_K, 2 + 13 * (QK_K // 32) + QK_K // 64),
    GGMLType(22, "IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),
    GGMLType(23, "IQ4_XS", QK_K, 2 + 2 + QK_K // 64 + QK_K // 2),
    GGMLType(24, "I8", 1, 1),
    GGMLType(25, "I16", 1, 2),
    GGMLType(26, "I32", 1, 4),
    GGMLType(27, "I64", 1, 8),
    GGMLType(28, "F64", 1, 8),
    GGMLType(29, "IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    GGMLType(30, "BF16", 1, 2),
    GGMLType(34, "TQ1_0", QK_K, 2 + QK_K // 64 + (QK_K - 4 * QK_K // 64) // 5),
    GGMLType(35, "TQ2_0", QK_K, 2 + QK_K // 4),
    GGMLType(39, "MXFP4", 32, 1 + 16),
    GGMLType(40, "NVFP4", 64, 64 // 16 + 32),
    GGMLType(41, "Q1_0", 128, 2 + 128 // 8),
    GGMLType(42, "Q2_0", 64, 2 + 64 // 4),
)

GGML_TYPE_COUNT = 43  # ggml.h: GGML_TYPE_COUNT; ids at or past it are invalid
GGML_TYPES: dict[int, GGMLType] = {t.id: t for t in _TYPES}
GGML_TYPES_BY_NAME: dict[str, GGMLType] = {t.name: t for t in _TYPES}


def ggml_type(type_id: int) -> GGMLType | None:
    """The type with this id, or None for ids that are out of range or removed from the format."""
    return GGML_TYPES.get(type_id)


# include/llama.h, enum llama_ftype: the names people use for whole-file quantizations.
FILE_TYPE_NAMES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
}
FILE_TYPE_GUESSED = 1024  # llama.h: LLAMA_FTYPE_GUESSED, or-ed in when not stored in the file


def file_type_name(file_type: int) -> str | None:
    """The quantization name for a `general.file_type` value, or None if unknown."""
    name = FILE_TYPE_NAMES.get(file_type & ~FILE_TYPE_GUESSED)
    if name is not None and file_type & FILE_TYPE_GUESSED:
        return f"{name} (guessed)"
    return name
