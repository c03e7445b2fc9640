"""The ggml type table against the vendored ggml source (when it is on this machine) and
against the `gguf` package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from engine.gguf.ggml_types import (
    FILE_TYPE_NAMES,
    GGML_TYPE_COUNT,
    GGML_TYPES,
    file_type_name,
    ggml_type,
)

GGML_SRC = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/ggml")
needs_source = pytest.mark.skipif(
    not GGML_SRC.is_dir(), reason="the vendored llama.cpp source is not on this machine"
)

C_SIZES = {
    "ggml_half": 2,
    "uint8_t": 1,
    "int8_t": 1,
    "uint16_t": 2,
    "int16_t": 2,
    "uint32_t": 4,
    "int32_t": 4,
    "float": 4,
    "double": 8,
    "int64_t": 8,
    "ggml_fp16_t": 2,
    "ggml_bf16_t": 2,
}


def c_eval(expr: str, names: dict[str, int]) -> int:
    """Evaluate a C size expression such as `2*sizeof(ggml_half) + QK_K/16`."""
    expr = re.sub(r"sizeof\((\w+)\)", lambda m: str(names[m.group(1)]), expr)
    expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f"({names[m.group(0)]})", expr)
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}))  # trusted vendored source


@needs_source
def test_table_matches_ggml_source() -> None:
    header = (GGML_SRC / "include" / "ggml.h").read_text()
    enum = dict(
        (name, int(value))
        for name, value in re.findall(r"^\s*GGML_TYPE_(\w+)\s*=\s*(\d+),", header, re.M)
    )
    assert enum.pop("COUNT") == GGML_TYPE_COUNT
    assert {name: t.id for name, t in ((t.name, t) for t in GGML_TYPES.values())} == enum

    common = (GGML_SRC / "src" / "ggml-common.h").read_text()
    names = dict(C_SIZES)
    for name, value in re.findall(
        r"^#define (QK\w*|K_SCALE_SIZE|IQ3S_N_SCALE) (.+?)\s*(?://.*)?$", common, re.M
    ):
        names[name] = c_eval(value, names)
    for block, expr in re.findall(r"static_assert\(sizeof\((block_\w+)\) == (.+?), \"", common):
        names[block] = c_eval(expr, names)

    traits = (GGML_SRC / "src" / "ggml.c").read_text()
    start = "type_traits[GGML_TYPE_COUNT] = {"
    table = traits[traits.index(start) + len(start) :]
    checked = 0
    for name, body in re.findall(r"\[GGML_TYPE_(\w+)\] = \{(.*?)\n    \},", table, re.S):
        blck = re.search(r"\.blck_size\s*=\s*([^,]+),", body).group(1)
        size = re.search(r"\.type_size\s*=\s*([^,]+),", body).group(1)
        ours = ggml_type(enum[name])
        assert ours is not None, name
        assert (ours.block_size, ours.type_size) == (c_eval(blck, names), c_eval(size, names)), name
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
