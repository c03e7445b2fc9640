"""Guards on the GUI process's environment.

PySide6 6.12.0 on CPython 3.11 drops a reference to None on every call of a method that returns
nothing, and to True on every signal emit; a few thousand calls later the interpreter aborts with
"Fatal Python error: none_dealloc". (On 3.12+ None and True are immortal, which hides it.) The GUI
makes thousands of such calls a minute, so this environment check fails loudly instead.
"""

from __future__ import annotations

import subprocess
import sys

_CHECK = """
import sys
from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal

class Emitter(QObject):
    fired = Signal()

app = QCoreApplication([])
emitter, timer = Emitter(), QTimer()
none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
for _ in range(200):
    timer.start(1000)
    emitter.setObjectName("x")
    emitter.fired.emit()
print(sys.getrefcount(None) - none_before, sys.getrefcount(True) - true_before)
"""


def test_the_qt_binding_keeps_the_refcounts_of_none_and_true():
    result = subprocess.run(
        [sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    none_delta, true_delta = (int(v) for v in result.stdout.split())
    # Leaks of a reference or two come and go with caches; 400 calls losing 400 do not.
    assert abs(none_delta) < 50 and abs(true_delta) < 50, (
        f"this PySide6 loses references to None ({none_delta}) / True ({true_delta}) on plain "
        "calls and would abort the GUI within minutes; use a PySide6 other than 6.12.0 on "
        "Python 3.11"
    )


def test_the_gui_modules_do_not_import_llama_cpp():
    """All engine work goes through the worker process; the GUI never loads llama.cpp."""
    code = (
        "import sys, app.shell.gui_main, app.shell.main_window, app.chat.view;"
        "import app.common.engine_bridge;"
        "sys.exit(3 if 'llama_cpp' in sys.modules else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
