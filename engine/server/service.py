"""`hearth serve` in the background: the record a running server leaves, its log with rotation,
and the systemd user unit that starts it at login.

    ServerRecord(pid, base_url, ...).write()     # by the serving process, once it listens
    running_server()                             # the record, if its process still runs
    stop_server(record)                          # SIGTERM, then waits (bounded)

The record lives in Hearth's data folder (server/running.json), so `hearth service status/stop`
and the window's Server page find a server however it was started: `hearth serve --detach`,
the systemd unit, or a terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.paths import data_dir

LOG_BYTES = 5 * 1024 * 1024  # a log file is rotated past this
LOG_FILES_KEPT = 3  # serve.log, serve.log.1, serve.log.2
UNIT_NAME = "hearth.service"


def server_dir() -> Path:
    return data_dir() / "server"


def default_log_path() -> Path:
    return server_dir() / "serve.log"


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    base_url: str  # http://127.0.0.1:8741/v1
    started_at: float
    serving: str  # the model's file name, or "the Library"
    log_path: str = ""  # "" when it prints to a terminal

    def write(self, path: Path | None = None) -> Path:
        path = path or record_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(temporary, path)
        return path

    def remove(self, path: Path | None = None) -> None:
        """Forget the record, if it is still this process's."""
        path = path or record_path()
        if read_record(path) == self:
            with contextlib.suppress(OSError):
                path.unlink()


def record_path() -> Path:
    return server_dir() / "running.json"


def read_record(path: Path | None = None) -> ServerRecord | None:
    try:
        data = json.loads((path or record_path()).read_text(encoding="utf-8"))
        return ServerRecord(
            pid=int(data["pid"]),
            base_url=str(data["base_url"]),
            started_at=float(data["started_at"]),
            serving=str(data["serving"]),
            log_path=str(data.get("log_path", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not reaped, does not). psutil, not
    os.kill(pid, 0): on Windows that call ends the process."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def running_server(path: Path | None = None) -> ServerRecord | None:
    """The record of a server that is running now (a stale record, its process gone, is
    removed and None returned)."""
    path = path or record_path()
    record = read_record(path)
    if record is None:
        return None
    if not process_alive(record.pid):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return record


def stop_server(record: ServerRecord, timeout_s: float = 15.0) -> bool:
    """Ask the server to stop (SIGTERM: it ends its requests and workers as on Ctrl+C) and wait
    for it; then SIGKILL. True once it has ended."""
    import psutil

    try:
        process = psutil.Process(record.pid)
        process.terminate()  # SIGTERM (uvicorn ends as on Ctrl+C); TerminateProcess on Windows
    except psutil.NoSuchProcess:
        return True
    if _wait_gone(record.pid, timeout_s):
        return True
    with contextlib.suppress(psutil.NoSuchProcess):
        process.kill()
    return _wait_gone(record.pid, 5.0)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.05)
    return not process_alive(pid)


class RotatingLog:
    """A text stream for sys.stdout/sys.stderr that writes to `path` and, past `max_bytes`,
    moves it to path.1 (path.1 to path.2, ...), keeping `keep` files in all."""

    def __init__(self, path: Path, max_bytes: int = LOG_BYTES, keep: int = LOG_FILES_KEPT):
        self.path, self.max_bytes, self.keep = Path(path), max_bytes, max(1, keep)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115

    def write(self, text: str) -> int:
        with self._lock:
            if self._file.tell() + len(text) > self.max_bytes and self._file.tell() > 0:
                self._rotate()
            self._file.write(text)
            self._file.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._file.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def _rotate(self) -> None:
        self._file.close()
        for n in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            newer = self.path if n == 1 else self.path.with_name(f"{self.path.name}.{n - 1}")
            if newer.exists():
                os.replace(newer, older)
        if self.keep == 1:
            self.path.unlink(missing_ok=True)
        self._file = open(self.path, "a", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115


def server_health(base_url: str, timeout: float = 3.0) -> dict | None:
    """GET /health's body (whatever its status), or None when nothing answers."""
    url = base_url.removesuffix("/v1") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as error:  # 503 while loading or restarting, or 401
        try:
            return json.loads(error.read())
        except ValueError:
            return {"state": f"HTTP {error.code}"}
    except (OSError, ValueError):
        return None


def health_summary(health: dict | None) -> str:
    """One line from /health's body: the loaded models, or the engine's state ("" for none)."""
    if not health:
        return ""
    models = health.get("models")
    if isinstance(models, list):
        names = ", ".join(str(m.get("model")) for m in models if isinstance(m, dict))
        return f"Loaded now: {names or 'none'}."
    return f"Engine: {health.get('state')}."


def serve_command(serve_args: list[str]) -> list[str]:
    """The command line that runs `hearth serve` with `serve_args` in this same Python."""
    return [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
            "serve", *serve_args]  # fmt: skip


def unit_path(home: Path | None = None) -> Path:
    """Where systemd looks for this user's units: $XDG_CONFIG_HOME/systemd/user."""
    config = os.environ.get("XDG_CONFIG_HOME")
    base = Path(config) if config and home is None else (home or Path.home()) / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def unit_text(serve_args: list[str], log_path: Path, environment: dict[str, str]) -> str:
    """A systemd user unit that runs `hearth serve` with `serve_args`, logging to `log_path`."""
    command = " ".join(_systemd_quote(a) for a in
                       [*serve_command(serve_args), "--log-file", str(log_path)])  # fmt: skip
    env_lines = "".join(
        f"Environment={_systemd_quote(f'{k}={v}')}\n" for k, v in sorted(environment.items())
    )
    return (
        "[Unit]\n"
        "Description=Hearth local API server (OpenAI- and Ollama-compatible)\n"
        "After=network.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={command}\n"
        f"{env_lines}"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def _systemd_quote(word: str) -> str:
    # systemd splits ExecStart like a shell, with its own specifiers: % must be doubled
    return shlex.quote(word.replace("%", "%%"))
