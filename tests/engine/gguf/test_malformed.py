"""One hand-built file per failure class of llama.cpp's tests/test-gguf.cpp, and a few more.

Each case says which field the error must name and the label of the byte offset it must point
at; the reader must raise GGUFError (never another type) with exactly those.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine.gguf import BytesSource, GGUFError, GGUFInternalError, read_model_info
from engine.gguf.values import ValueType
from tests.engine.gguf.craft import Builder, padded, tensor_bytes, valid_model

INT32_MAX = (1 << 31) - 1
U64_MAX = (1 << 64) - 1

Case = tuple[bytes, str, int, str]  # file, field, offset, a word the detail must contain


def kv_file(write_kvs: Callable[[Builder], None], n_kv: int) -> Builder:
    b = Builder().header(0, n_kv)
    write_kvs(b)
    return b


def tensor_file(
    tensors: list[tuple[str, tuple[int, ...], str | int, int]],
    *,
    n_dims: int | None = None,
    data: int | None = None,
    alignment: int | None = None,
    pad: bool = True,
) -> Builder:
    """A file with these tensor infos; the type may be a name or a raw id."""
    b = Builder().header(len(tensors), 1 if alignment else 0)
    if alignment:
        b.kv("general.alignment", ValueType.UINT32, alignment)
    total = 0
    for i, (name, shape, type_, offset) in enumerate(tensors):
        b.mark(f"t{i}")
        b.string(name, f"t{i}.name")
        b.u32(len(shape) if n_dims is None else n_dims, f"t{i}.n_dims")
        for j, dim in enumerate(shape):
            b.i64(dim, f"t{i}.dim{j}")
        if isinstance(type_, str):
            from engine.gguf.ggml_types import GGML_TYPES_BY_NAME

            b.i32(GGML_TYPES_BY_NAME[type_].id, f"t{i}.type")
            total = offset + tensor_bytes(shape, type_)
        else:
            b.i32(type_, f"t{i}.type")
        b.u64(offset, f"t{i}.offset")
    b.mark("header_end")
    if pad:
        b.pad(alignment or 32)
    b.data(total if data is None else data)
    return b


def case(b: Builder, field: str, label: str, word: str) -> Case:
    return b.bytes(), field, b.marks[label] if label in b.marks else int(label), word


def header_cases() -> dict[str, Case]:
    return {
        "bad magic": case(Builder().header(0, 0, magic=b"FUGG"), "magic", "0", "not"),
        "version 0": case(Builder().header(0, 0, version=0), "version", "4", "version 0"),
        "version 1": case(Builder().header(0, 0, version=1), "version", "4", "no longer"),
        "version 4": case(Builder().header(0, 0, version=4), "version", "4", "not supported"),
        "tensor count -1": case(Builder().header(-1, 0), "tensor count", "8", "-1"),
        "tensor count huge": case(Builder().header(1 << 40, 0), "tensor count", "8", "[0,"),
        "tensor count over bytes left": case(
            Builder().header(1000, 0), "tensor count", "8", "cannot fit"
        ),
        "key count -1": case(Builder().header(0, -1), "metadata key count", "16", "-1"),
        "key count huge": case(Builder().header(0, 1 << 62), "metadata key count", "16", "[0,"),
        "key count over bytes left": case(
            Builder().header(0, 100).raw(bytes(64)), "metadata key count", "16", "cannot fit"
        ),
        "empty file": case(Builder(), "magic", "0", "ends at byte 0"),
    }


def kv_cases() -> dict[str, Case]:
    def bad_key_size(b):
        b.string("general.name", "k", length=U64_MAX).raw(bytes(16))

    def empty_key(b):
        b.string("", "k").i32(ValueType.UINT8).raw(b"\x01").raw(bytes(8))

    def bad_type(b):
        b.string("my_key", "k").i32(13, "t").raw(bytes(8))

    def negative_type(b):
        b.string("my_key", "k").i32(-1, "t").raw(bytes(8))

    def bad_element_type(b):
        b.string("my_key", "k").i32(ValueType.ARRAY).i32(99, "t").u64(0)

    def nested_array(b):
        b.string("my_key", "k").i32(ValueType.ARRAY).i32(ValueType.ARRAY, "t").u64(0)

    def duplicate(b):
        b.kv("my_key", ValueType.UINT32, 1, "k0").kv("my_key", ValueType.UINT32, 2, "k1")

    def alignment(value, vtype=ValueType.UINT32):
        return lambda b: b.kv("general.alignment", vtype, value, "k")

    def string_past_end(b):
        b.string("my_key", "k").i32(ValueType.STRING).u64(1000, "len").raw(b"short")

    def string_over_cap(b):
        b.string("my_key", "k").i32(ValueType.STRING).u64(1 << 40, "len").raw(bytes(8))

    def array_huge(b):
        b.string("my_key", "k").i32(ValueType.ARRAY).i32(ValueType.UINT32).u64(1 << 61, "len")

    def array_past_end(b):
        b.string("my_key", "k").i32(ValueType.ARRAY).i32(ValueType.UINT64).u64(10, "len")
        b.raw(bytes(72))

    def string_element_past_end(b):
        b.string("my_key", "k").i32(ValueType.ARRAY).i32(ValueType.STRING).u64(2)
        b.string("ok").u64(U64_MAX, "e1")

    def long_string_array_bad_element(b):  # over the inline limit: the fast scanning path
        b.string("tokenizer.ggml.tokens", "k").i32(ValueType.ARRAY).i32(ValueType.STRING)
        b.u64(3000)
        for i in range(2500):
            b.string(f"t{i}")
        b.u64(1 << 50, "e2500").raw(bytes(4000))

    def key_not_utf8(b):
        b.string(b"\xff\xfe", "k").i32(ValueType.UINT8).raw(b"\x01")

    cases = {
        "key length -1": (bad_key_size, 1, "metadata key #0 length", "k", "over the limit"),
        "empty key": (empty_key, 1, "metadata key #0", "k", "empty"),
        "bad value type": (bad_type, 1, "metadata 'my_key' value type", "t", "13"),
        "negative value type": (negative_type, 1, "metadata 'my_key' value type", "t", "-1"),
        "bad array element type": (
            bad_element_type,
            1,
            "metadata 'my_key' array element type",
            "t",
            "99",
        ),
        "nested array": (nested_array, 1, "metadata 'my_key' array element type", "t", "nested"),
        "duplicate key": (duplicate, 2, "metadata key #1 'my_key'", "k1", "duplicates"),
        "alignment 13": (alignment(13), 1, "metadata 'general.alignment'", "k", "power of two"),
        "alignment 0": (alignment(0), 1, "metadata 'general.alignment'", "k", "power of two"),
        "alignment huge": (alignment(1 << 20), 1, "metadata 'general.alignment'", "k", "over"),
        "alignment wrong type": (
            alignment(32, ValueType.INT32),
            1,
            "metadata 'general.alignment'",
            "k",
            "uint32",
        ),
        "string past end": (string_past_end, 1, "metadata 'my_key' length", "len", "left"),
        "string over cap": (string_over_cap, 1, "metadata 'my_key' length", "len", "limit"),
        "array length huge": (array_huge, 1, "metadata 'my_key' array length", "len", "over"),
        "array past end": (array_past_end, 1, "metadata 'my_key' array length", "len", "left"),
        "string element length -1": (
            string_element_past_end,
            1,
            "metadata 'my_key' element #1 length",
            "e1",
            "limit",
        ),
        "long string array bad element": (
            long_string_array_bad_element,
            1,
            "metadata 'tokenizer.ggml.tokens' element #2500 length",
            "e2500",
            "limit",
        ),
        "key not utf-8": (key_not_utf8, 1, "metadata key #0", "k", "UTF-8"),
    }
    out = {}
    for name, (write, n_kv, field, label, word) in cases.items():
        out[name] = case(kv_file(write, n_kv), field, label, word)
    return out


def tensor_cases() -> dict[str, Case]:
    long_name = "my_tensor_0_with_a_very_long_name_which_is_longer_than_ggml_allows"
    big = 4 * INT32_MAX
    q4 = tensor_bytes((32, 2), "Q4_0")
    return {
        "over-long tensor name": case(
            tensor_file([(long_name, (32,), "F32", 0)]), "tensor #0 name length", "t0.name", "limit"
        ),
        "empty tensor name": case(
            tensor_file([("", (32,), "F32", 0)]), "tensor #0 name", "t0.name", "empty"
        ),
        "duplicate tensor name": case(
            tensor_file([("w", (8,), "F32", 0), ("w", (8,), "F32", 32)]),
            "tensor #1 name 'w'",
            "t1.name",
            "duplicates",
        ),
        "n_dims 0": case(
            tensor_file([("w", (), "F32", 0)]), "tensor 'w' n_dims", "t0.n_dims", "[1, 4]"
        ),
        "n_dims 5": case(
            tensor_file([("w", (1, 1, 1, 1, 1), "F32", 0)]),
            "tensor 'w' n_dims",
            "t0.n_dims",
            "[1, 4]",
        ),
        "negative dimension": case(
            tensor_file([("w", (8, -1), "F32", 0)]), "tensor 'w' dimension 1", "t0.dim1", "negative"
        ),
        "element count overflow": case(
            tensor_file([("w", (big, big), 24, 0)]), "tensor 'w' shape", "t0.n_dims", "overflows"
        ),
        "byte size overflow": case(
            tensor_file([("w", (1 << 31, 1 << 31), "I64", 0)], data=0),
            "tensor 'w' shape",
            "t0.n_dims",
            "bytes",
        ),
        "unknown ggml type": case(
            tensor_file([("w", (32,), 43, 0)]), "tensor 'w' ggml type", "t0.type", "43"
        ),
        "removed ggml type": case(
            tensor_file([("w", (32,), 4, 0)]), "tensor 'w' ggml type", "t0.type", "4"
        ),
        "negative ggml type": case(
            tensor_file([("w", (32,), -1, 0)]), "tensor 'w' ggml type", "t0.type", "-1"
        ),
        "first dimension not a block multiple": case(
            tensor_file([("w", (33, 2), "Q4_0", 0)]),
            "tensor 'w' dimension 0",
            "t0.dim0",
            "block size 32",
        ),
        "offset -1": case(
            tensor_file([("w", (32,), "F32", U64_MAX)], data=128),
            "tensor 'w' offset",
            "t0.offset",
            "alignment",
        ),
        "offset out of sequence": case(
            tensor_file([("a", (32, 2), "Q4_0", 0), ("b", (32, 2), "Q4_0", 96)], data=256),
            "tensor 'b' offset",
            "t1.offset",
            "out of sequence",
        ),
        "offset repeated": case(
            tensor_file([("a", (32, 2), "Q4_0", 0), ("b", (32, 2), "Q4_0", 0)], data=256),
            "tensor 'b' offset",
            "t1.offset",
            f"must be {padded(q4)}",
        ),
        "offset inconsistent with custom alignment": case(
            tensor_file(
                [("a", (32,), "F32", 0), ("b", (32,), "F32", 128)], alignment=256, data=1024
            ),
            "tensor 'b' offset",
            "t1.offset",
            "alignment 256",
        ),
        "data past the end": case(
            tensor_file([("a", (32, 2), "Q4_0", 0), ("b", (32, 4), "Q4_0", 64)], data=64 + 72 - 1),
            "tensor 'b' offset",
            "t1.offset",
            "past the end",
        ),
        "no data at all": case(
            tensor_file([("w", (30,), "F32", 0)], data=0, pad=False),
            "tensor data",
            "header_end",
            "past the end",
        ),
    }


ALL_CASES = {**header_cases(), **kv_cases(), **tensor_cases()}


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_malformed_file_names_field_and_offset(name: str) -> None:
    data, field, offset, word = ALL_CASES[name]
    with pytest.raises(GGUFError) as caught:
        read_model_info(BytesSource(data, name), deadline_s=5.0)
    err = caught.value
    assert not isinstance(err, GGUFInternalError), err
    assert (err.field, err.offset) == (field, offset), str(err)
    assert word in err.detail, str(err)
    assert f"{field} at byte {offset}:" in str(err)


def test_fixture_count_covers_every_llama_cpp_failure_class() -> None:
    # test-gguf.cpp's failure classes (HANDCRAFTED_*, excluding the *_SUCCESS ones), by the
    # fixture that covers each here.
    llama_cpp_classes = {
        "HEADER_BAD_MAGIC": "bad magic",
        "HEADER_BAD_VERSION_0": "version 0",
        "HEADER_BAD_VERSION_1": "version 1",
        "HEADER_BAD_VERSION_FUTURE": "version 4",
        "HEADER_BAD_N_TENSORS": "tensor count -1",
        "HEADER_BAD_N_KV": "key count -1",
        "KV_BAD_KEY_SIZE": "key length -1",
        "KV_EMPTY_KEY": "empty key",
        "KV_BAD_TYPE": "bad value type",
        "KV_DUPLICATE_KEY": "duplicate key",
        "KV_BAD_ALIGN": "alignment 13",
        "KV_WRONG_TYPE_ALIGN": "alignment wrong type",
        "TENSORS_BAD_NAME_SIZE": "over-long tensor name",
        "TENSORS_BAD_N_DIMS": "n_dims 5",
        "TENSORS_BAD_SHAPE": "negative dimension",
        "TENSORS_NE_TOO_BIG": "element count overflow",
        "TENSORS_NBYTES_TOO_BIG": "byte size overflow",
        "TENSORS_BAD_TYPE": "unknown ggml type",
        "TENSORS_BAD_OFFSET": "offset -1",
        "TENSORS_DUPLICATE_NAME": "duplicate tensor name",
        "TENSORS_BAD_ALIGN": "alignment 13",
        "TENSORS_INCONSISTENT_ALIGN": "offset inconsistent with custom alignment",
        "DATA_NOT_ENOUGH_DATA": "data past the end",
        "DATA_BAD_ALIGN": "alignment 13",
        "DATA_INCONSISTENT_ALIGN": "offset inconsistent with custom alignment",
    }
    assert set(llama_cpp_classes.values()) <= set(ALL_CASES)


def test_valid_header_truncated_at_every_byte_fails_cleanly() -> None:
    b = valid_model()
    data = b.bytes()
    end_of_data = len(data)
    for cut in range(end_of_data):
        with pytest.raises(GGUFError) as caught:
            read_model_info(BytesSource(data[:cut]), deadline_s=5.0)
        assert not isinstance(caught.value, GGUFInternalError), (cut, caught.value)
    assert read_model_info(BytesSource(data)).block_count == 2  # the uncut file is fine


def test_truncation_in_the_header_points_inside_the_header() -> None:
    b = valid_model()
    data = b.bytes()
    header_end = b.marks["header_end"]
    for cut in range(0, header_end, 7):
        with pytest.raises(GGUFError) as caught:
            read_model_info(BytesSource(data[:cut]))
        assert caught.value.offset <= cut, (cut, str(caught.value))
