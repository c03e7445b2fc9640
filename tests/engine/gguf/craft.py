"""Hand-built GGUF bytes for tests: valid files, and files broken in one precise place.

The builder records the offset of each field it writes under a label, so a test can assert that
the reader's error points at exactly the byte where the bad field starts.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from engine.gguf.ggml_types import GGML_TYPES_BY_NAME
from engine.gguf.values import FIXED_FORMATS, ValueType

ALIGNMENT = 32


class Builder:
    def __init__(self, order: str = "<") -> None:
        self.order = order
        self.buf = bytearray()
        self.marks: dict[str, int] = {}

    def mark(self, label: str | None) -> None:
        if label is not None:
            self.marks[label] = len(self.buf)

    def raw(self, data: bytes, label: str | None = None) -> Builder:
        self.mark(label)
        self.buf += data
        return self

    def pack(self, fmt: str, value: int | float, label: str | None = None) -> Builder:
        if fmt in "IQ" and isinstance(value, int):
            value %= 1 << (32 if fmt == "I" else 64)  # lets tests write -1 as all ones
        return self.raw(struct.pack(self.order + fmt, value), label)

    def u32(self, value: int, label: str | None = None) -> Builder:
        return self.pack("I", value, label)

    def i32(self, value: int, label: str | None = None) -> Builder:
        return self.pack("i", value, label)

    def u64(self, value: int, label: str | None = None) -> Builder:
        return self.pack("Q", value, label)

    def i64(self, value: int, label: str | None = None) -> Builder:
        return self.pack("q", value, label)

    def string(self, text: str | bytes, label: str | None = None, length: int | None = None):
        data = text.encode() if isinstance(text, str) else text
        self.u64(len(data) if length is None else length, label)
        return self.raw(data)

    def header(
        self, n_tensors: int, n_kv: int, *, magic: bytes = b"GGUF", version: int = 3
    ) -> Builder:
        return self.raw(magic).u32(version).i64(n_tensors).i64(n_kv)

    def value(self, vtype: ValueType, value) -> Builder:
        if vtype == ValueType.STRING:
            return self.string(value)
        return self.pack(FIXED_FORMATS[vtype], value)

    def kv(self, key: str, vtype: ValueType, value, label: str | None = None) -> Builder:
        self.string(key, label)
        self.i32(int(vtype))
        return self.value(vtype, value)

    def kv_array(
        self, key: str, etype: ValueType, values: Sequence, label: str | None = None
    ) -> Builder:
        self.string(key, label)
        self.i32(int(ValueType.ARRAY)).i32(int(etype)).u64(len(values))
        for v in values:
            self.value(etype, v)
        return self

    def tensor(
        self,
        name: str,
        shape: Sequence[int],
        type_name: str,
        offset: int,
        label: str | None = None,
    ) -> Builder:
        if label is not None:
            self.mark(label)
        self.string(name, label and label + ".name")
        self.u32(len(shape), label and label + ".n_dims")
        for j, dim in enumerate(shape):
            self.i64(dim, label and f"{label}.dim{j}")
        self.i32(GGML_TYPES_BY_NAME[type_name].id, label and label + ".type")
        return self.u64(offset, label and label + ".offset")

    def pad(self, alignment: int = ALIGNMENT) -> Builder:
        while len(self.buf) % alignment:
            self.buf.append(0)
        return self

    def data(self, n: int) -> Builder:
        self.buf += bytes(i % 251 for i in range(n))
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


def tensor_bytes(shape: Sequence[int], type_name: str) -> int:
    gtype = GGML_TYPES_BY_NAME[type_name]
    n = 1
    for dim in shape:
        n *= dim
    return n // gtype.block_size * gtype.type_size


def padded(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


# A small but complete model header: a few of every kind of metadata, three tensors, data.
VALID_TENSORS = (
    ("token_embd.weight", (64, 10), "Q8_0"),
    ("blk.0.attn_q.weight", (256, 4), "Q4_K"),
    ("blk.1.ffn_norm.weight", (64,), "F32"),
)


def valid_model(
    order: str = "<",
    *,
    alignment: int | None = None,
    name: str | bytes = "Tiny Test",
    tensors: Sequence[tuple[str, tuple[int, ...], str]] = VALID_TENSORS,
    tokenizer: str = "gpt2",
) -> Builder:
    """A consistent little 'llama' model; tests and fuzz seeds start from it."""
    b = Builder(order)
    kvs = 12 + (alignment is not None)
    b.header(len(tensors), kvs)
    b.kv("general.architecture", ValueType.STRING, "llama", "kv.arch")
    b.kv("general.name", ValueType.STRING, name, "kv.name")
    b.kv("general.file_type", ValueType.UINT32, 7)
    b.kv("llama.block_count", ValueType.UINT32, 2, "kv.block_count")
    b.kv("llama.context_length", ValueType.UINT32, 2048)
    b.kv("llama.embedding_length", ValueType.UINT32, 64)
    b.kv("llama.attention.head_count", ValueType.UINT32, 4)
    b.kv_array("llama.attention.head_count_kv", ValueType.INT32, [2, 1], "kv.head_count_kv")
    b.kv("llama.rope.freq_base", ValueType.FLOAT32, 10000.0)
    b.kv("tokenizer.ggml.model", ValueType.STRING, tokenizer)
    b.kv_array("tokenizer.ggml.tokens", ValueType.STRING, ["<s>", "</s>", "a", "b"], "kv.tokens")
    b.kv("tokenizer.ggml.eos_token_id", ValueType.UINT32, 1)
    if alignment is not None:
        b.kv("general.alignment", ValueType.UINT32, alignment, "kv.alignment")
    align = alignment or ALIGNMENT
    offset = 0
    for i, (tensor, shape, type_name) in enumerate(tensors):
        b.tensor(tensor, shape, type_name, offset, f"t{i}")
        offset += padded(tensor_bytes(shape, type_name), align)
    b.mark("header_end")
    b.pad(align)
    b.mark("data")
    b.data(offset)
    return b
