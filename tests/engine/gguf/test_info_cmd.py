"""`hearth info`: the summary, --json, and exit status 2 with the reader's message."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from engine.cli import info_cmd
from tests.engine.gguf.craft import valid_model
from tests.engine.gguf.range_server import RangeServer
from tests.engine.hostile_gguf import TERMINAL_ATTACK


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
    assert "no such file" in capsys.readouterr().err


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


def test_terminal_escapes_in_a_model_name_are_printed_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "evil.gguf"
    path.write_bytes(valid_model(name=TERMINAL_ATTACK).bytes())
    assert run(str(path), "--tensors") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u202e" not in out
    assert out.startswith("Evil\\x1b]0;pwned\\x07\\x1b[2J\\x0dFAKE: all checks passed\\u202e")
    assert run(str(path), "--json") == 0
    assert "\x1b" not in capsys.readouterr().out  # JSON escapes it as \u001b


def test_a_path_that_is_not_utf8_is_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = os.fsdecode(bytes(tmp_path) + b"/m\xff.gguf")
    Path(path).write_bytes(valid_model().bytes())
    assert run(path) == 0
    assert "m\\xff.gguf (GGUF v3" in capsys.readouterr().out


HOSTILE_ADDRESSES = [
    "hf://owner/repo/../../../etc/passwd.gguf",
    "hf://owner/repo/%2e%2e/%2e%2e/etc/passwd.gguf",
    "hf://owner/repo/..%2F..%2Fetc/passwd.gguf",
    "hf://owner/repo/%252e%252e/x.gguf",
    "hf://owner/repo/\uff0e\uff0e/x.gguf",  # fullwidth dots: '..' after NFKC
    "hf://owner/repo/a\\..\\..\\x.gguf",
    "hf://owner/repo/a%5c..%5cx.gguf",
    "hf://owner/repo//x.gguf",
    "hf://owner/repo/sub//x.gguf",
    "hf://owner/repo/x.gguf/",
    "hf://owner/../x.gguf",
    "hf://../repo/x.gguf",
    "hf://owner/repo/x%00.gguf",
    "hf://owner/repo/x.gguf@../../main",
]


@pytest.mark.parametrize("address", HOSTILE_ADDRESSES)
def test_hostile_hub_addresses_are_refused_before_any_request(
    address: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    range_server: RangeServer,
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", range_server.url)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    assert run(address) == 2
    err = capsys.readouterr().err
    assert "Refused" in err or "not of the form" in err
    assert range_server.requests == []


def test_the_hub_token_goes_only_to_the_files_resolve_path(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], range_server: RangeServer
) -> None:
    range_server.serve("/org/model/resolve/main/sub/tiny.gguf", valid_model().bytes())
    monkeypatch.setenv("HF_ENDPOINT", range_server.url)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    from huggingface_hub import constants  # read at its import: another test may have set it

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    assert run("hf://org/model/sub/tiny.gguf") == 0
    assert range_server.authorized  # the token was sent...
    assert set(range_server.authorized) == {"/org/model/resolve/main/sub/tiny.gguf"}  # ...there
