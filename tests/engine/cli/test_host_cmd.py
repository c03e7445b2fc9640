"""`hearth host` (engine/cli/host_cmd.py): loopback unless --listen, the warning that the protocol
has no authentication, and what it says when it cannot serve."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.cli import main
from testkit.rpc_helpers import free_port_pair


@pytest.mark.parametrize("address", ["pc2", "::1", "[::1]", "300.1.1.1"])
def test_listen_takes_an_ipv4_address_only(address, capsys):
    assert main(["host", "--listen", address]) == 2
    assert "--listen takes an IPv4 address" in capsys.readouterr().err


def test_an_engine_without_rpc_says_to_rebuild(monkeypatch, capsys):
    from engine.llama import rpc

    monkeypatch.setattr(rpc, "rpc_available", lambda: False)
    assert main(["host"]) == 1
    assert "without llama.cpp's RPC backend" in capsys.readouterr().err


def test_an_unknown_device_names_the_ones_there_are(capsys):
    from engine.llama import rpc

    if not rpc.rpc_available():
        pytest.skip("the installed llama_cpp has no RPC backend")
    assert main(["host", "--device", "CUDA7"]) == 1
    err = capsys.readouterr().err
    assert "no device named CUDA7" in err and "CPU" in err


def _banner(*args: str) -> str:
    """The lines `hearth host` prints before it serves, then it is stopped."""
    from engine.llama import rpc

    if not rpc.rpc_available():
        pytest.skip("the installed llama_cpp has no RPC backend")
    command = [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())"]
    command += ["host", "--port", str(free_port_pair()), "--no-cache", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if line.startswith("On the other machine"):
                break
    finally:
        process.kill()
        process.wait(10)
        process.stdout.close()
    return "".join(lines)


def test_the_default_is_loopback_without_a_warning():
    banner = _banner()
    assert "Hearth helper at 127.0.0.1:" in banner
    assert "CPU:" in banner and "tensor cache: off" in banner
    assert "no authentication" not in banner


def test_another_address_is_served_with_the_warning():
    banner = _banner("--listen", "127.0.0.2", "--memory-limit", "1.5")
    assert "Hearth helper at 127.0.0.2:" in banner
    assert "no authentication or encryption" in banner and "SSH tunnel" in banner
    assert "planned up to 1.5 GiB" in banner
