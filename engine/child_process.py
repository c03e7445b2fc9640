"""How to start one of Hearth's own Python modules as a child process.

From a source or pip install that is `python -m MODULE`. In a frozen bundle (PyInstaller) there
is no Python interpreter to give `-m` to: the bundle's executable is started again with
`--run-module MODULE`, which app.launcher hands to runpy.
"""

from __future__ import annotations

import sys

RUN_MODULE_FLAG = "--run-module"


def module_command(module: str, *args: str, python: str | None = None) -> list[str]:
    if getattr(sys, "frozen", False) and python is None:
        return [sys.executable, RUN_MODULE_FLAG, module, *args]
    return [python or sys.executable, "-m", module, *args]
