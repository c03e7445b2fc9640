"""Files written by the `gguf` package read back to exactly what was written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFEndian, GGUFWriter

from engine.gguf import GGUFError, read_model_info
from engine.gguf.ggml_types import GGML_TYPES
from engine.gguf.values import INLINE_ARRAY_LIMIT, GGUFArray

SCALARS = {
    "test.u8": ("add_uint8", 250),
    "test.i8": ("add_int8", -7),
    "test.u16": ("add_uint16", 65000),
    "test.i16": ("add_int16", -30000),
    "test.u32": ("add_uint32", 4_000_000_000),
    "test.i32": ("add_int32", -2_000_000_000),
    "test.u64": ("add_uint64", (1 << 64) - 1),
    "test.i64": ("add_int64", -(1 << 63)),
    "test.f32": ("add_float32", 0.5),
    "test.f64": ("add_float64", -1e300),
    "test.bool": ("add_bool", True),
    "test.str": ("add_string", "héllo\nworld ✓"),
}

# (name, ggml type, ggml shape (row length first))
QUANT_TENSORS = [
    ("blk.0.attn_q.weight", GGMLQuantizationType.Q4_K, (256, 3)),
    ("blk.0.attn_k.weight", GGMLQuantizationType.Q5_0, (64, 2)),
    ("blk.1.ffn_down.weight", GGMLQuantizationType.Q6_K, (512, 1)),
    ("blk.1.ffn_up.weight", GGMLQuantizationType.IQ4_XS, (256, 2)),
    ("blk.1.ffn_gate.weight", GGMLQuantizationType.MXFP4, (32, 5)),
    ("output.weight", GGMLQuantizationType.Q8_0, (96, 4)),
    ("token_embd.weight", GGMLQuantizationType.TQ2_0, (256, 2)),
]


def write_model(path: Path, *, endianess: GGUFEndian = GGUFEndian.LITTLE, alignment=None):
    w = GGUFWriter(path, "llama", endianess=endianess)
    w.add_name("Round Trip")
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(256)
    w.add_head_count(8)
    w.add_head_count_kv([4, 2])
    w.add_file_type(15)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, (method, value) in SCALARS.items():
        getattr(w, method)(key, value)
    w.add_array("test.arr_i32", [1, -2, 3])
    w.add_array("test.arr_f32", [0.25, -4.0])
    w.add_array("test.arr_str", ["a", "bé", ""])
    w.add_array("test.arr_bool", [True, False, True])
    w.add_array("test.arr_big", list(range(INLINE_ARRAY_LIMIT + 5)))
    w.add_chat_template("{{ messages }}")
    w.add_chat_template([{"name": "tool_use", "template": "{{ tools }}"}])
    rng = np.random.default_rng(0)
    w.add_tensor("blk.0.attn_norm.weight", rng.standard_normal(256, dtype=np.float32))
    w.add_tensor("blk.1.attn_norm.weight", rng.standard_normal((3, 256)).astype(np.float16))
    for name, qtype, shape in QUANT_TENSORS:
        gt = GGML_TYPES[int(qtype)]
        row_bytes = shape[0] // gt.block_size * gt.type_size
        raw = rng.integers(0, 255, size=(shape[1], row_bytes), dtype=np.uint8)
        w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("endianess", [GGUFEndian.LITTLE, GGUFEndian.BIG])
def test_metadata_round_trip(tmp_path: Path, endianess: GGUFEndian) -> None:
    path = tmp_path / "model.gguf"
    write_model(path, endianess=endianess)
    info = read_model_info(path)
    assert info.byte_order == ("big" if endianess == GGUFEndian.BIG else "little")
    for key, (_, value) in SCALARS.items():
        assert info.metadata[key] == value, key
    assert info.metadata["test.arr_i32"].values == (1, -2, 3)
    assert info.metadata["test.arr_f32"].values == (0.25, -4.0)
    assert info.metadata["test.arr_str"].values == ("a", "bé", "")
    assert info.metadata["test.arr_bool"].values == (True, False, True)
    big = info.metadata["test.arr_big"]
    assert isinstance(big, GGUFArray) and big.values is None
    assert big.length == INLINE_ARRAY_LIMIT + 5
    assert info.chat_template == "{{ messages }}"
    assert dict(info.chat_templates) == {"tool_use": "{{ tools }}"}
    assert info.metadata["tokenizer.chat_templates"].values == ("tool_use",)
    assert (info.name, info.architecture, info.block_count) == ("Round Trip", "llama", 2)
    assert info.head_count == 8 and info.head_count_kv == (4, 2)
    assert [info.n_head_kv(i) for i in range(2)] == [4, 2]
    assert info.key_length == info.value_length == 256 // 8
    assert info.quant_name == "Q4_K_M"


@pytest.mark.parametrize("alignment", [None, 1, 64, 4096])
def test_tensor_infos_round_trip(tmp_path: Path, alignment: int | None) -> None:
    path = tmp_path / "model.gguf"
    write_model(path, alignment=alignment)
    info = read_model_info(path)
    align = alignment or 32
    assert info.alignment == align
    assert info.data_offset % align == 0
    expected = {
        "blk.0.attn_norm.weight": ("F32", (256,), 256 * 4),
        "blk.1.attn_norm.weight": ("F16", (256, 3), 256 * 3 * 2),
    }
    for name, qtype, shape in QUANT_TENSORS:
        gt = GGML_TYPES[int(qtype)]
        expected[name] = (gt.name, shape, shape[0] * shape[1] // gt.block_size * gt.type_size)
    got = {t.name: (t.type_name, t.shape, t.n_bytes) for t in info.tensors}
    assert got == expected
    # offsets are the running sum of padded sizes, and the data ends at the file's end
    running = 0
    for t in info.tensors:
        assert t.offset == running
        running += -(-t.n_bytes // align) * align
    assert info.data_offset + running == path.stat().st_size
    assert info.parameter_count == sum(t.n_elements for t in info.tensors)
    per_layer = [0, 0]
    for t in info.tensors:
        if t.layer is not None:
            per_layer[t.layer] += t.n_bytes
    assert list(info.layer_weight_bytes) == per_layer
    assert info.nonlayer_weight_bytes == got["output.weight"][2] + got["token_embd.weight"][2]


def test_split_files_report_their_part(tmp_path: Path) -> None:
    w = GGUFWriter(tmp_path / "split.gguf", "llama", split_max_tensors=2)
    w.add_block_count(3)
    for i in range(5):
        w.add_tensor(f"blk.{min(i, 2)}.w{i}", np.ones(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    parts = sorted(tmp_path.glob("split-*.gguf"))
    assert len(parts) == 3
    for no, part in enumerate(parts):
        info = read_model_info(part)
        assert (info.split_no, info.split_count, info.split_tensors_count) == (no, 3, 5)
        assert info.is_split
        assert len(info.tensors) == (2 if no < 2 else 1)


def test_truncated_download_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    write_model(path)
    full = path.read_bytes()
    path.write_bytes(full[:-100])
    with pytest.raises(GGUFError, match="past the end of the file"):
        read_model_info(path)
