"""The sampling a GGUF recommends (`general.sampling.*`): read when set and in range only."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from engine.chat.sampling_defaults import model_sampling_defaults, sampling_defaults


def write_model(path: Path, sampling: dict[str, float | int]) -> Path:
    """A tiny GGUF whose header recommends `sampling` (general.sampling.<key> -> value)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(256)
    for key, value in sampling.items():
        if isinstance(value, int):
            writer.add_uint32(f"general.sampling.{key}", value)
        else:
            writer.add_float32(f"general.sampling.{key}", value)
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_header_that_recommends_sampling(tmp_path):
    path = write_model(tmp_path / "m.gguf", {"temp": 0.6, "top_k": 20, "top_p": 0.95})
    assert model_sampling_defaults(path) == {"temperature": 0.6, "top_k": 20, "top_p": 0.95}


def test_a_header_without_recommendations_and_an_unreadable_file(tmp_path):
    assert model_sampling_defaults(write_model(tmp_path / "m.gguf", {})) == {}
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf")
    assert model_sampling_defaults(tmp_path / "bad.gguf") == {}
    assert model_sampling_defaults(tmp_path / "missing.gguf") == {}


@pytest.mark.parametrize(
    "metadata, expected",
    [
        ({"general.sampling.temp": 1e9}, {}),  # out of range: not trusted
        ({"general.sampling.top_p": -0.5}, {}),
        ({"general.sampling.top_k": "40"}, {}),  # a string where a number belongs
        ({"general.sampling.temp": True}, {}),
        ({"general.sampling.penalty_repeat": 1.1}, {"repeat_penalty": 1.1}),
        ({"general.sampling.min_p": 0}, {"min_p": 0.0}),
    ],
)
def test_values_are_checked(metadata, expected):
    assert sampling_defaults(metadata) == expected
