"""Header checks that refuse a file llama.cpp would abort on, and the structural check a
download without a sha256 gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.gguf import read_model_info
from engine.gguf.load_check import data_end_problem, load_problem
from tests.engine.gguf.craft import VALID_TENSORS, valid_model


def info_of(tmp_path: Path, data: bytes):
    path = tmp_path / "m.gguf"
    path.write_bytes(data)
    return read_model_info(path)


def test_a_sound_model_passes(tmp_path: Path) -> None:
    info = info_of(tmp_path, valid_model().bytes())
    assert load_problem(info, for_chat=True) is None
    assert data_end_problem(info) is None


@pytest.mark.parametrize(
    ("tensor", "type_name", "said"),
    [
        ("blk.1.ffn_norm.weight", "I32", "blk.1.ffn_norm.weight is typed I32"),
        ("blk.1.ffn_norm.weight", "F64", "typed F64, which no weight can be"),
        ("blk.1.ffn_norm.weight", "Q8_0", "the norm blk.1.ffn_norm.weight is typed Q8_0"),
        ("token_embd.weight", "I8", "token_embd.weight is typed I8"),
    ],
)
def test_tensor_types_impossible_for_their_role_are_refused(
    tmp_path: Path, tensor: str, type_name: str, said: str
) -> None:
    tensors = [
        (name, (64, 2) if type_name == "Q8_0" and name == tensor else shape,
         type_name if name == tensor else kind)
        for name, shape, kind in VALID_TENSORS
    ]  # fmt: skip
    if type_name == "Q8_0":  # a norm is one row: keep it 1-D
        tensors = [(n, (64,) if n == tensor else s, k) for n, s, k in tensors]
    problem = load_problem(info_of(tmp_path, valid_model(tensors=tensors).bytes()))
    assert problem is not None and said in problem
    assert "llama.cpp would abort" in problem and "download the model" in problem


def test_a_file_without_a_vocabulary_is_refused_for_chat_only(tmp_path: Path) -> None:
    info = info_of(tmp_path, valid_model(tokenizer="no_vocab").bytes())
    assert load_problem(info) is None
    problem = load_problem(info, for_chat=True)
    assert problem is not None and "no_vocab" in problem and "Choose a chat model" in problem


def test_data_that_ends_elsewhere_than_the_header_says_is_found(tmp_path: Path) -> None:
    data = valid_model().bytes()  # its last tensor ends on the alignment: no padding after it
    assert data_end_problem(info_of(tmp_path, data)) is None
    longer = info_of(tmp_path, data + b"\0")  # one byte the header does not account for
    problem = data_end_problem(longer)
    assert problem == (
        f"its header says the tensor data ends at byte {len(data):,}, but the file is "
        f"{len(data) + 1:,} bytes long"
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_hyper_parameter_that_is_not_finite_is_refused(tmp_path: Path, bad: float) -> None:
    """A NaN layer_norm_rms_epsilon passed the check and aborted llama.cpp at the first decode
    (with a gdb backtrace in the message): every number in the header must be finite."""
    import struct

    data = valid_model().bytes()
    base = struct.pack("<f", 10000.0)  # llama.rope.freq_base
    assert data.count(base) == 1
    problem = load_problem(info_of(tmp_path, data.replace(base, struct.pack("<f", bad))))
    assert problem is not None and "not finite" in problem
    assert "llama.rope.freq_base" in problem and "download the model" in problem
