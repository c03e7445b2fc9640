"""`hearth info`: the summary, --json, and exit status 2 with the reader's message."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from engine.cli import info_cmd
from tests.engine.gguf.craft import valid_model
from tests.engine.gguf.range_server import RangeServer


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="hearth info")
    info_cmd.add_arguments(parser)
    return info_cmd.run(parser.parse_args(list(argv)))


def test_summary_of_a_valid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(valid_model().bytes())
    assert run(str(path), "--tensors") == 0
    out = capsys.readouterr().out
    assert out.startswith("Tiny Test (llama)\n")
    assert "quantization:   Q8_0 (file type 7)" in out
    assert "4 heads, 1-2 (varies by layer) KV heads" in out
    assert "blk.0.attn_q.weight" in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(valid_model().bytes())
    assert run(str(path), "--json", "--tensors") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["architecture"] == "llama" and data["head_count_kv"] == [2, 1]
    assert data["metadata"]["tokenizer.ggml.tokens"] == {
        "type": "string",
        "length": 4,
        "values": ["<s>", "</s>", "a", "b"],
    }
    assert data["tensors"][0]["name"] == "token_embd.weight"


def test_bad_file_exits_2_with_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = valid_model()
    data = bytearray(b.bytes())
    data[b.marks["t1.type"]] = 99  # an unknown ggml type
    path = tmp_path / "bad.gguf"
    path.write_bytes(bytes(data))
    assert run(str(path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    at = b.marks["t1.type"]
    assert f"tensor 'blk.0.attn_q.weight' ggml type at byte {at}: 99" in captured.err
    assert "download it again" in captured.err


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("/no/such/model.gguf") == 2
    assert "does not exist" in capsys.readouterr().err


def test_hub_model_spec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], range_server: RangeServer
) -> None:
    range_server.serve("/org/model/resolve/main/tiny.gguf", valid_model().bytes())
    monkeypatch.setenv("HF_ENDPOINT", range_server.url)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    assert run("hf://org/model/tiny.gguf") == 0
    assert "hf://org/model/tiny.gguf (GGUF v3" in capsys.readouterr().out
    assert run("hf://org/model") == 2
    assert "not of the form" in capsys.readouterr().err


def test_parse_hub_spec() -> None:
    assert info_cmd.parse_hub_spec("hf://a/b/c/d.gguf@v2") == ("a/b", "c/d.gguf", "v2")
    assert info_cmd.parse_hub_spec("hf://a/b/d.gguf") == ("a/b", "d.gguf", "main")


def test_without_a_model_it_describes_the_starter_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    starter = tmp_path / "starter.gguf"
    starter.write_bytes(valid_model().bytes())
    monkeypatch.setattr("engine.starter_model.starter_model_path", lambda: starter)
    assert run() == 0
    assert capsys.readouterr().out.startswith("Tiny Test (llama)\n")


def test_without_a_model_or_a_starter_model_it_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("engine.starter_model.starter_model_path", lambda: None)
    assert run() == 2
    assert "Pass a .gguf file" in capsys.readouterr().err
