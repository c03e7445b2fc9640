"""The built-in KV check in the background: after a model loads, its file's K/V types are measured
against f16 in a child process (engine/session/kv_quality.py; the GUI never waits for it) unless
the result is already kept for that file. `finished` carries the line the Model page shows.

    runner = KvCheckRunner()
    runner.finished.connect(label.setText)
    runner.check("/models/qwen.gguf")     # the kept figures at once, or a child process
"""

from __future__ import annotations

import json
import sys

from PySide6.QtCore import QObject, QProcess, Signal

from engine.session.kv_quality import cached, check_refusal, summary_text


class KvCheckRunner(QObject):
    finished = Signal(str)  # the summary line, or why the check did not run
    started = Signal(str)  # the file being checked

    def __init__(self, parent: QObject | None = None, program: str = sys.executable):
        super().__init__(parent)
        self._program = program
        self._process: QProcess | None = None
        self._path = ""

    @property
    def running(self) -> bool:
        return self._process is not None

    def check(self, path: str) -> None:
        found = cached(path)
        if found:
            self.finished.emit(summary_text(found))
            return
        refused = check_refusal(path)
        if refused:
            self.finished.emit(refused)
            return
        if self._process is not None:
            if self._path == path:
                return  # already under way
            self._process.kill()  # another model loaded: its check no longer matters
            self._process = None
        self._path = path
        process = QProcess(self)
        process.finished.connect(lambda *_: self._done(process))
        self._process = process
        self.started.emit(path)
        process.start(self._program, ["-m", "engine.session.kv_quality", path])

    def _done(self, process: QProcess) -> None:
        if process is not self._process:
            return  # a check that was replaced
        self._process = None
        out = bytes(process.readAllStandardOutput()).decode("utf-8", "replace")
        err = bytes(process.readAllStandardError()).decode("utf-8", "replace")
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                try:
                    self.finished.emit(json.loads(line)["summary"])
                    return
                except (ValueError, KeyError):
                    break
        said = [line for line in err.splitlines() if line.startswith("The KV check")]
        # (the child's own refusal or failure, in its words)
        self.finished.emit(said[-1] if said else "The KV check did not finish; Best fit uses "
                           "the figures measured on other models.")  # fmt: skip

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.waitForFinished(2000)
            self._process = None
