"""Which names a request may give the loaded model: the Library's and Ollama's as well as the
file's (engine/server/request_params.py model_names), by table."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.server.request_params import model_names

LIBRARY = Path("/data/hearth/models")


@pytest.mark.parametrize(
    ("path", "named", "not_named"),
    [
        ("/tmp/SmolLM2-135M-Instruct.Q4_1.gguf",
         ["smollm2-135m-instruct.q4_1", "smollm2-135m-instruct.q4_1.gguf"], ["tmp/smollm2"]),
        ("/data/hearth/models/Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf",
         ["qwen/qwen3-8b-gguf", "qwen3-8b-gguf:q4_k_m", "qwen/qwen3-8b-gguf:q4_k_m",
          "qwen/qwen3-8b-gguf/qwen3-8b-q4_k_m.gguf", "qwen3-8b-q4_k_m"], ["qwen3-8b"]),
        ("/data/hearth/models/o/r/big-Q8_0-00001-of-00003.gguf",
         ["big-q8_0", "big-q8_0.gguf", "o/r", "r:q8_0"], ["big-q8_0-00001-of-00003x"]),
        ("/home/u/.cache/huggingface/hub/models--unsloth--gpt-oss-20b-GGUF/snapshots/abc/"
         "gpt-oss-20b-MXFP4.gguf", ["unsloth/gpt-oss-20b-gguf", "gpt-oss-20b-gguf:mxfp4"], []),
        # a folder that is not the library's says nothing about a repository
        ("/home/u/models/mine/x-Q4_K_M.gguf", ["x-q4_k_m"], ["models/mine", "mine:q4_k_m"]),
    ],
)  # fmt: skip
def test_the_names_a_model_goes_by(path, named, not_named):
    names = model_names(path, LIBRARY)
    for name in named:
        assert name in names, (name, names)
    for name in not_named:
        assert name not in names
