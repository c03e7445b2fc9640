"""`hearth hw --host ADDR` (engine/cli/remote_cmd.py through hw_cmd): helper machines beside the
local devices, a helper that cannot be used said so, --remember."""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.hardware.remote_store import load_helpers
from tests.engine.hardware.fake_rpc_server import FakeRpcServer

GIB = 1024**3


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))


@pytest.fixture
def helper():
    fake = FakeRpcServer(devices=[(20 * GIB, 24 * GIB)])
    yield fake
    fake.close()


def test_a_helper_is_listed_with_its_memory_and_link(helper, capsys):
    assert main(["hw", "--no-engine", "--host", f"127.0.0.1:{helper.port}"]) == 0
    out = capsys.readouterr().out
    assert "Helper machines (llama.cpp RPC)" in out
    assert f"127.0.0.1:{helper.port} (RPC protocol 7.0.0, link" in out
    assert "RPC device 0 [unknown]: 20.0 GiB free of 24.0 GiB" in out
    assert "plain llama.cpp rpc-server" in out
    assert load_helpers() == []  # not remembered unless asked


def test_remember_keeps_the_helpers_that_answered(helper, capsys):
    gone = FakeRpcServer()
    gone.close()
    argv = ["hw", "--no-engine", "--remember", "--host", f"127.0.0.1:{helper.port}"]
    assert main([*argv, "--host", f"127.0.0.1:{gone.port}"]) == 1
    assert "cannot be reached" in capsys.readouterr().out
    assert load_helpers() == [f"127.0.0.1:{helper.port}"]


def test_json_has_the_helpers(helper, capsys):
    assert main(["hw", "--no-engine", "--json", "--host", f"127.0.0.1:{helper.port}"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["helpers"]
    assert entry["devices"][0]["total_bytes"] == 24 * GIB
    assert entry["link"]["bytes_per_s"] > 0


def test_hearth_plan_places_what_this_machine_cannot_hold_on_a_helper(helper, tmp_path, capsys):
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

    model = write_sparse_gguf(tmp_path / "llama3-8b.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    argv = ["plan", str(model), "--vram", "3", "--ram", "2", "--ctx", "4096"]
    assert main(argv) == 1  # 4.6 GiB of weights: not on a 3 GiB card and 2 GiB of RAM
    capsys.readouterr()
    assert main([*argv, "--host", f"127.0.0.1:{helper.port}"]) == 0
    out = capsys.readouterr().out
    assert f"RPC device 0 on 127.0.0.1:{helper.port}" in out
    assert "Uses the helpers" in out


def test_hearth_plan_with_a_helper_that_does_not_answer_says_so(tmp_path, capsys):
    gone = FakeRpcServer()
    gone.close()
    assert main(["plan", "x.gguf", "--host", f"127.0.0.1:{gone.port}"]) == 2
