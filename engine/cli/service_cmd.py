"""`hearth service`: the API server in the background (engine/server/service.py).

    hearth serve --detach [SERVE OPTIONS]     start it in the background now
    hearth service install [SERVE OPTIONS]    a systemd user unit that starts it at login
    hearth service status                     whether one runs: address, pid, what it serves, log
    hearth service stop                       stop the one that runs (however it was started)
    hearth service uninstall                  remove the unit

The log goes to a file, rotated past 5 MiB with 3 files kept (the data folder's
server/serve.log unless --log-file says otherwise).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from engine.server import service
from engine.untrusted_text import printable_line

NOT_RUNNING = 3  # as `systemctl status` says it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    from engine.cli import serve_cmd

    install = actions.add_parser(
        "install",
        help="write a systemd user unit that runs `hearth serve` at login, with the options "
        "given here (those of `hearth serve`)",
    )
    serve_cmd.add_arguments(install)
    actions.add_parser("uninstall", help="remove the systemd user unit")
    actions.add_parser("status", help="whether a Hearth server runs, where, and what it serves")
    actions.add_parser("stop", help="stop the Hearth server that runs")


def run(args: argparse.Namespace) -> int:
    if args.action == "install":
        if args.api_key and args.api_key != os.environ.get("HEARTH_API_KEY", ""):
            print(_KEY_IN_UNIT, file=sys.stderr)
            return 2
        if args.detach or args.log_file:
            print("Leave out --detach and --log-file: the unit runs the server in the "
                  "background, logged.", file=sys.stderr)  # fmt: skip
            return 2
        return install(serve_args_of(args))
    if args.action == "uninstall":
        return uninstall()
    if args.action == "status":
        return status()
    return stop()


_KEY_IN_UNIT = (
    "A unit file is readable by other programs: do not put a key in it. Create named keys "
    "with `hearth keys create NAME` instead; the server takes them."
)


def serve_args_of(args: argparse.Namespace) -> list[str]:
    """The `hearth serve` options in `args` that differ from serve's defaults, as a command
    line (the key never: see _KEY_IN_UNIT)."""
    from engine.cli import serve_cmd

    parser = argparse.ArgumentParser(add_help=False)
    serve_cmd.add_arguments(parser)
    words: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, action.default)
        if action.dest in ("api_key", "detach", "log_file") or value == action.default:
            continue
        if not action.option_strings:  # the model
            words.insert(0, str(value))
        elif isinstance(action, argparse._StoreTrueAction):
            words.append(action.option_strings[0])
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                words += [action.option_strings[0], str(item)]
        else:
            words += [action.option_strings[0], str(value)]
    return words


def install(serve_args: list[str]) -> int:
    path = service.unit_path()
    environment = {k: os.environ[k] for k in ("HEARTH_DATA_DIR", "PYTHONPATH") if os.environ.get(k)}
    text = service.unit_text(serve_args, service.default_log_path(), environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"Wrote {path}. Start it now and at every login with:\n"
          f"  systemctl --user daemon-reload && systemctl --user enable --now {service.UNIT_NAME}\n"
          f"Its log: {service.default_log_path()}. `hearth service status` shows it.")  # fmt: skip
    return 0


def uninstall() -> int:
    path = service.unit_path()
    if not path.exists():
        print(f"No unit at {path}.")
        return 0
    path.unlink()
    print(f"Removed {path}. If it was enabled: systemctl --user disable --now "
          f"{service.UNIT_NAME}")  # fmt: skip
    return 0


def status() -> int:
    record = service.running_server()
    if record is None:
        print("No Hearth server is running. Start one with `hearth serve --detach`.")
        return NOT_RUNNING
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.started_at))
    print(f"Hearth server running: {record.base_url} (pid {record.pid}, since {since}), "
          f"serving {printable_line(record.serving)}.")  # fmt: skip
    summary = service.health_summary(service.server_health(record.base_url))
    if summary:
        print(printable_line(summary))
    if record.log_path:
        print(f"Log: {record.log_path}")
    return 0


def stop() -> int:
    record = service.running_server()
    if record is None:
        print("No Hearth server is running.")
        return 1
    if not service.stop_server(record):
        print(f"The server (pid {record.pid}) did not stop; end it with `kill -9 {record.pid}`.",
              file=sys.stderr)  # fmt: skip
        return 1
    print(f"Stopped the Hearth server at {record.base_url} (pid {record.pid}).")
    return 0
