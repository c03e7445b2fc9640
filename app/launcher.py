"""The `hearth` console script: no arguments opens the GUI; subcommands run headless.

This module imports neither PySide6 nor the GUI unless the GUI is asked for, so that
`hearth chat`, `hearth info` and `hearth hw` work on machines without a display.
"""

from __future__ import annotations

import sys

from engine.child_process import RUN_MODULE_FLAG


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 2 and args[0] == RUN_MODULE_FLAG:
        # A frozen bundle starting its own engine worker (engine/child_process.py).
        import runpy

        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    if args and args[0] not in ("--model", "-m"):
        from engine.cli import main as cli_main

        return cli_main(args)
    from app.qt_libs import main as check_qt_libraries

    # Before Qt is imported: without its X11 libraries it aborts the process with one line.
    if check_qt_libraries() != 0:
        return 1
    from app.shell.gui_main import run_gui

    return run_gui(args)


if __name__ == "__main__":
    sys.exit(main())
