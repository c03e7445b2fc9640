"""The ggml type table against the ggml that the installed llama.cpp runs, and against the
`gguf` package."""

from __future__ import annotations

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from engine.gguf.ggml_types import (
    FILE_TYPE_NAMES,
    GGML_TYPE_COUNT,
    GGML_TYPES,
    file_type_name,
    ggml_type,
)


def _installed_ggml():
    """The ggml that the installed llama.cpp runs: its own type table, through ctypes."""
    import ctypes

    import llama_cpp

    from engine.llama.devices import _candidate_libraries

    for lib in _candidate_libraries(llama_cpp):
        try:
            blck, size, name = lib.ggml_blck_size, lib.ggml_type_size, lib.ggml_type_name
        except AttributeError:
            continue
        blck.restype, blck.argtypes = ctypes.c_int64, [ctypes.c_int]
        size.restype, size.argtypes = ctypes.c_size_t, [ctypes.c_int]
        name.restype, name.argtypes = ctypes.c_char_p, [ctypes.c_int]
        return blck, size, name
    raise AssertionError("the installed llama.cpp exports no ggml type functions")


def test_table_matches_the_installed_ggml() -> None:
    blck_size, type_size, type_name = _installed_ggml()
    checked = 0
    for type_id in range(GGML_TYPE_COUNT):
        ours = ggml_type(type_id)
        if ours is None:  # ids ggml retired (Q4_2, Q4_3, ...): it keeps them as empty slots
            assert blck_size(type_id) == 0, type_id
            continue
        assert (ours.block_size, ours.type_size) == (blck_size(type_id), type_size(type_id)), (
            ours.name
        )
        assert type_name(type_id).decode().upper() == ours.name.upper(), type_id
        checked += 1
    assert checked == len(GGML_TYPES)


def test_table_matches_the_gguf_package() -> None:
    for qtype, (block, size) in GGML_QUANT_SIZES.items():
        ours = ggml_type(int(qtype))
        assert ours is not None and ours.name == qtype.name
        if qtype == GGMLQuantizationType.Q8_1:
            assert (ours.block_size, ours.type_size) == (32, 36)  # gguf 0.19.0 says 40: stale
            continue
        assert (ours.block_size, ours.type_size) == (block, size), qtype.name


def test_removed_and_out_of_range_types_are_unknown() -> None:
    for type_id in (-1, 4, 5, 31, 32, 33, 36, 37, 38, GGML_TYPE_COUNT, 1 << 31):
        assert ggml_type(type_id) is None


def test_file_type_names() -> None:
    for ftype in LlamaFileType:
        if ftype.name.startswith("MOSTLY_") or ftype.name == "ALL_F32":
            expected = ftype.name.removeprefix("MOSTLY_").replace("ALL_F32", "F32")
            assert FILE_TYPE_NAMES.get(int(ftype)) == expected, ftype
    assert file_type_name(15) == "Q4_K_M"
    assert file_type_name(15 | 1024) == "Q4_K_M (guessed)"
    assert file_type_name(999) is None
