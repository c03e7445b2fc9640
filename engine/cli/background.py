"""`hearth serve` in the background: `--detach` (the same command in a new session, its log in
a file), and the record by which `hearth service status/stop` and the window find a server
that runs (engine/server/service.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from engine.server import service
from engine.server.config import ServerConfig
from engine.untrusted_text import printable_line

START_TIMEOUT_S = 600.0  # a large model may take minutes to load before the server listens


def detach(args: argparse.Namespace) -> int:
    """`hearth serve --detach`: the same command in a new session, logging to a file; returns
    once it listens (or says why it did not)."""
    running = service.running_server()
    if running is not None:
        print(f"A Hearth server is already running at {running.base_url} (pid {running.pid}); "
              "`hearth service stop` stops it.", file=sys.stderr)  # fmt: skip
        return 1
    if "serve" not in sys.argv:
        print("--detach is for the command line (`hearth serve --detach`).", file=sys.stderr)
        return 2
    serve_args = [a for a in sys.argv[sys.argv.index("serve") + 1 :] if a != "--detach"]
    log = Path(args.log_file).expanduser() if args.log_file else service.default_log_path()
    if not args.log_file:
        serve_args += ["--log-file", str(log)]
    child = subprocess.Popen(
        service.serve_command(serve_args),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl+C in this terminal, or closing it, does not reach it
    )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            print(f"The server did not start (exit status {child.returncode}). The end of its "
                  f"log ({log}):\n{_tail(log)}", file=sys.stderr)  # fmt: skip
            return 1
        record = service.running_server()
        ours = record is not None and record.pid == child.pid
        if ours and service.server_health(record.base_url, 1.0):
            print(f"Hearth API on {record.base_url} in the background (pid {child.pid}), "
                  f"serving {printable_line(record.serving)}. Log: {log}. "
                  "`hearth service stop` stops it.")  # fmt: skip
            return 0
        time.sleep(0.2)
    print(f"The server did not answer within {START_TIMEOUT_S:.0f} s; see {log}.", file=sys.stderr)
    return 1


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def running_record(config: ServerConfig, serving: str, log_file: str | None):
    """The record `hearth service status/stop` and the window find this server by, while it
    serves."""
    from engine.server.service import ServerRecord

    log_path = str(Path(log_file).expanduser()) if log_file else ""
    record = ServerRecord(pid=os.getpid(), base_url=config.base_url, started_at=time.time(),
                          serving=serving, log_path=log_path)  # fmt: skip
    try:
        record.write()
    except OSError as exc:  # a read-only data folder: the server runs, unrecorded
        print(f"[The server could not record itself for `hearth service`: {exc}]", file=sys.stderr)
    try:
        yield record
    finally:
        record.remove()
