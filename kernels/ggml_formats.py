"""GGUF weight block formats the kernels read, as byte layouts (no torch needed).

Each ggml block type is a fixed-size record of fields; `FORMATS[name].fields` lists them in file
order as (field name, byte offset, byte length, element dtype). PackedWeight splits a tensor's
blocks into one plane per field, so every field of a row is contiguous and aligned: the bytes
and their count are unchanged, only their order (ggml's 34-byte Q8_0 or 210-byte Q6_K records
leave 16-bit fields at odd addresses, which rules out wide loads). The layouts are ggml's
(ggml-common.h) and are checked against `gguf.quants.dequantize` by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels.errors import UnsupportedTensor


@dataclass(frozen=True)
class BlockFormat:
    name: str
    ggml_type: int  # gguf.GGMLQuantizationType value
    block_size: int  # weights per block
    type_size: int  # bytes per block
    fields: tuple[tuple[str, int, int, str], ...]  # (name, offset, length in bytes, dtype)

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size


def _f(name: str, offset: int, length: int, dtype: str) -> tuple[str, int, int, str]:
    return (name, offset, length, dtype)


FORMATS: dict[str, BlockFormat] = {
    f.name: f
    for f in (
        BlockFormat("F32", 0, 1, 4, (_f("w", 0, 4, "float32"),)),
        BlockFormat("F16", 1, 1, 2, (_f("w", 0, 2, "float16"),)),
        BlockFormat("BF16", 30, 1, 2, (_f("w", 0, 2, "bfloat16"),)),
        BlockFormat("Q4_0", 2, 32, 18, (_f("d", 0, 2, "float16"), _f("qs", 2, 16, "uint8"))),
        BlockFormat(
            "Q4_1",
            3,
            32,
            20,
            (_f("d", 0, 2, "float16"), _f("m", 2, 2, "float16"), _f("qs", 4, 16, "uint8")),
        ),
        BlockFormat(
            "Q5_0",
            6,
            32,
            22,
            (_f("d", 0, 2, "float16"), _f("qh", 2, 4, "int32"), _f("qs", 6, 16, "uint8")),
        ),
        BlockFormat(
            "Q5_1",
            7,
            32,
            24,
            (
                _f("d", 0, 2, "float16"),
                _f("m", 2, 2, "float16"),
                _f("qh", 4, 4, "int32"),
                _f("qs", 8, 16, "uint8"),
            ),
        ),
        BlockFormat("Q8_0", 8, 32, 34, (_f("d", 0, 2, "float16"), _f("qs", 2, 32, "int8"))),
        BlockFormat(
            "Q4_K",
            12,
            256,
            144,
            (
                _f("d", 0, 2, "float16"),
                _f("dmin", 2, 2, "float16"),
                _f("scales", 4, 12, "uint8"),
                _f("qs", 16, 128, "uint8"),
            ),
        ),
        BlockFormat(
            "Q5_K",
            13,
            256,
            176,
            (
                _f("d", 0, 2, "float16"),
                _f("dmin", 2, 2, "float16"),
                _f("scales", 4, 12, "uint8"),
                _f("qh", 16, 32, "uint8"),
                _f("qs", 48, 128, "uint8"),
            ),
        ),
        BlockFormat(
            "Q6_K",
            14,
            256,
            210,
            (
                _f("ql", 0, 128, "uint8"),
                _f("qh", 128, 64, "uint8"),
                _f("scales", 192, 16, "int8"),
                _f("d", 208, 2, "float16"),
            ),
        ),
        # MXFP4 (gpt-oss's experts): a shared E8M0 exponent byte, then 16 bytes of E2M1 codes,
        # weights j (low nibble of byte j) and 16 + j (high nibble)
        BlockFormat("MXFP4", 39, 32, 17, (_f("e", 0, 1, "uint8"), _f("qs", 1, 16, "uint8"))),
    )
}
_BY_VALUE = {f.ggml_type: f for f in FORMATS.values()}


def block_format(ggml_type: object) -> BlockFormat:
    """The format for a gguf.GGMLQuantizationType, its int value or its name ("Q4_K")."""
    if isinstance(ggml_type, str):
        found = FORMATS.get(ggml_type.upper())
    else:
        found = _BY_VALUE.get(int(ggml_type))  # an IntEnum member or a plain int
    if found is None:
        name = getattr(ggml_type, "name", ggml_type)
        raise UnsupportedTensor(
            f"ggml type {name} has no Hearth kernel; supported: {', '.join(FORMATS)}"
        )
    return found


def check_shape(fmt: BlockFormat, shape: tuple[int, int]) -> None:
    n_out, n_in = shape
    if n_out < 1 or n_in < 1:
        raise UnsupportedTensor(f"{fmt.name} tensor of shape {shape}: both sizes must be >= 1")
    if n_in % fmt.block_size:
        raise UnsupportedTensor(
            f"{fmt.name} tensor of shape {shape}: rows of {n_in} weights are not whole "
            f"blocks of {fmt.block_size}"
        )
