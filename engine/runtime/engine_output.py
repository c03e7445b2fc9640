"""What the engine process prints on stderr, kept for the person: the cause apart from the tail.

When llama.cpp aborts, its one line that says why (`binary-ops.cpp:135: binary_op: unsupported
types`, `GGML_ASSERT(...) failed`, `what(): ...`) comes first, and then what follows it can be a
backtrace of a hundred lines or more (ggml's through gdb, when a run turns GGML_NO_BACKTRACE off;
CUDA's and glibc's own). A tail of the last lines keeps only the backtrace. So the lines that
state an error are kept apart, first ones first, and shown before the tail.

Every kept line is escaped (engine.untrusted_text.printable_line): llama.cpp prints a model's
metadata while loading it, and the file's text must not reach a terminal or a label raw.
"""

from __future__ import annotations

import collections
import re
import threading

from engine.untrusted_text import printable_line

TAIL_LINES_KEPT = 40
CAUSE_LINES_KEPT = 8
MAX_LINE_CHARS = 1000

# ggml_abort: "<file>:<line>: <message>"; GGML_ASSERT; uncaught C++ exceptions; llama.cpp's
# LLAMA_LOG_ERROR lines ("llama_model_load: error loading model: ...").
_CAUSE = re.compile(
    r"^\S+\.(?:c|cc|cpp|cu|m|mm|h|hpp|metal):\d+: "
    r"|GGML_ASSERT|terminate called|what\(\):"
    r"|\b(?:error|failed|fatal|abort(?:ed)?|unsupported|invalid)\b",
    re.IGNORECASE,
)
# gdb's and glibc's backtrace lines, which name functions like ggml_abort themselves, and the
# loader's listing of the file's own text.
_BACKTRACE = re.compile(
    r"^\s*(?:#\d+\s|\[New |\[Thread |\[Inferior |Using host libthread_db|0x[0-9a-f]+ in "
    r"|warning: .*(?:debug|symbol))"
    r"|\(\+0x[0-9a-f]+\)\s*\[0x[0-9a-f]+\]"
    r"|^llama_model_loader: - ",  # the file's metadata and tensor types, listed while loading
    re.IGNORECASE,
)


def is_cause_line(line: str) -> bool:
    """True for a line that states an error, as opposed to progress or a backtrace frame."""
    return bool(_CAUSE.search(line)) and not _BACKTRACE.search(line)


class EngineOutput:
    """The lines an engine process printed: its last lines, and its first error lines apart.
    Safe to fill from one thread and read from others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES_KEPT)
        self._causes: list[str] = []

    def clear(self) -> None:
        with self._lock:
            self._tail.clear()
            self._causes.clear()

    def add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip()
        if not line:
            return
        line = printable_line(line[:MAX_LINE_CHARS].replace("\t", "    "))
        with self._lock:
            self._tail.append(line)
            causes = self._causes
            if len(causes) < CAUSE_LINES_KEPT and line not in causes and is_cause_line(line):
                causes.append(line)  # once: each thread that aborts prints the same line

    def last_lines(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._tail)

    def cause_lines(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._causes)


def report_lines(
    causes: tuple[str, ...], tail: tuple[str, ...], n_tail: int = TAIL_LINES_KEPT
) -> list[str]:
    """The cause lines, then the last `n_tail` lines that are not cause lines already shown."""
    lines = []
    if causes:
        lines.append("llama.cpp said:")
        lines.extend(f"  ! {line}" for line in causes)
    rest = [line for line in tail if line not in causes][-n_tail:]
    if rest:
        lines.append("Last lines from the engine:")
        lines.extend(f"  | {line}" for line in rest)
    return lines


def crash_report(message: str, causes: tuple[str, ...], tail: tuple[str, ...], n_tail: int) -> str:
    """The text the CLI prints for a crash: the message, then `report_lines`."""
    return "\n".join([message, *report_lines(causes, tail, n_tail)])
