"""`hearth serve --detach` and `hearth service install/status/stop` (engine/cli/background.py,
engine/cli/service_cmd.py, engine/server/service.py): the unit file written where systemd looks
(a temporary HOME here), the log rotated, the running server's record, and a detached server
found and stopped."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.server import service

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def test_install_writes_a_user_unit_that_runs_serve_with_its_options(home, capsys):
    assert main(["service", "install", "--port", "8800", "--keep-alive", "10m"]) == 0
    unit = home / "home" / ".config" / "systemd" / "user" / "hearth.service"
    text = unit.read_text()
    assert f"Wrote {unit}" in capsys.readouterr().out
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    command = shlex.split(exec_start.removeprefix("ExecStart="))
    assert command[0] == sys.executable
    log = str(home / "data" / "server" / "serve.log")
    assert command[3:] == ["serve", "--keep-alive", "10m", "--port", "8800", "--log-file", log]
    assert f"Environment=HEARTH_DATA_DIR={home / 'data'}" in text.replace("'", "")
    assert "WantedBy=default.target" in text and "Restart=on-failure" in text
    assert main(["service", "uninstall"]) == 0 and not unit.exists()


@pytest.mark.parametrize(
    ("serve_args", "why"),
    [(["--api-key", "x" * 20], "hearth keys create"), (["--detach"], "Leave out"),
     (["--port", "http"], "is not a whole number")],
)  # fmt: skip
def test_install_refuses_a_key_in_the_unit_and_options_that_would_not_run(
    home, capsys, serve_args, why
):
    with contextlib.suppress(SystemExit):  # argparse's own refusal exits with 2
        assert main(["service", "install", *serve_args]) == 2
    assert why in capsys.readouterr().err
    assert not service.unit_path().exists()


def test_the_log_is_rotated_keeping_three_files(tmp_path):
    log = service.RotatingLog(tmp_path / "serve.log", max_bytes=100, keep=3)
    for i in range(12):
        log.write(f"line {i:02d} " + "x" * 30 + "\n")  # 39 bytes: two lines a file
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["serve.log", "serve.log.1", "serve.log.2"]
    assert (tmp_path / "serve.log").read_text().startswith("line 10")
    assert (tmp_path / "serve.log.2").read_text().startswith("line 06")
    assert all(p.stat().st_size <= 100 for p in tmp_path.iterdir())


def test_a_record_whose_process_is_gone_is_forgotten(home):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    service.ServerRecord(gone.pid, "http://127.0.0.1:1/v1", 0.0, "x").write()
    assert service.running_server() is None and not service.record_path().exists()
    mine = service.ServerRecord(os.getpid(), "http://127.0.0.1:1/v1", 0.0, "x")
    mine.write()
    assert service.running_server() == mine
    mine.remove()
    assert service.running_server() is None


@pytest.mark.slow
def test_a_detached_server_is_found_by_status_and_stopped(starter_model, tmp_path):
    from tests.engine.server.conftest import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HEARTH_DATA_DIR": str(tmp_path),
           "HEARTH_API_KEY": ""}  # fmt: skip

    def hearth(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
             *args], capture_output=True, text=True, timeout=180, cwd=REPO, env=env,
        )  # fmt: skip

    started = hearth("serve", "--detach", str(starter_model), "--port", str(port),
                     "--parallel", "1", "--ctx", "256", "--threads", "1")  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert f"127.0.0.1:{port}/v1 in the background" in started.stdout
    record = service.read_record(tmp_path / "server" / "running.json")
    try:
        status = hearth("service", "status")
        assert status.returncode == 0 and f":{port}/v1" in status.stdout
        assert "Engine: idle." in status.stdout
        assert hearth("serve", "--detach", "--port", str(port)).returncode == 1  # one at a time
        stopped = hearth("service", "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert not service.process_alive(record.pid)
        assert hearth("service", "status").returncode == service_cmd_not_running()
        log = (tmp_path / "server" / "serve.log").read_text()
        assert "Hearth API on" in log
    finally:
        if record is not None and service.process_alive(record.pid):
            service.stop_server(record, timeout_s=5)


def service_cmd_not_running() -> int:
    from engine.cli.service_cmd import NOT_RUNNING

    return NOT_RUNNING


@pytest.mark.parametrize(
    ("health", "line"),
    [(None, ""), ({"state": "idle"}, "Engine: idle."),
     ({"state": "library", "models": []}, "Loaded now: none."),
     ({"state": "library", "models": [{"model": "a"}, {"model": "b"}]}, "Loaded now: a, b.")],
)  # fmt: skip
def test_health_in_one_line(health, line):
    assert service.health_summary(health) == line
