"""Run the engine's build and show how far it is, instead of pip's "still running...".

`pip wheel -v` passes the build's own output through: scikit-build-core's "*** Configuring
CMake..." and Ninja's "[37/212] Building CXX object ...". From those this prints one line per
step of five percent (or one line kept up to date on a terminal), so a build of several
minutes is never silent; the build's full output is kept only in its last lines, printed if it
fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from typing import TextIO

_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")  # Ninja: [done/total]
_MAKE = re.compile(r"^\s*\[\s*(\d+)%\]\s")  # Make: [ 42%]
_PHASES = (
    ("Configuring CMake", "configuring llama.cpp (CMake)"),
    ("Building project", "compiling llama.cpp"),
    ("Installing project", "packing the wheel"),
)
STEP = 5  # percent between lines when the output is not a terminal
TAIL_LINES = 40


def fraction_done(line: str) -> float | None:
    """How far the build is, from one line of its output (None: the line does not say)."""
    ninja = _NINJA.match(line)
    if ninja:
        done, total = int(ninja.group(1)), int(ninja.group(2))
        return done / total if total else None
    make = _MAKE.match(line)
    return int(make.group(1)) / 100 if make else None


def phase_of(line: str) -> str | None:
    return next((text for marker, text in _PHASES if marker in line), None)


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def run_with_progress(
    cmd: Sequence[str], *, env: dict[str, str] | None = None, out: TextIO = sys.stderr
) -> int:
    """Run `cmd`, report its progress on `out`, and return its exit status."""
    started = time.monotonic()
    live = out.isatty()  # one line kept up to date, else a line per STEP percent
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    shown: int | None = None  # the percentage last printed
    with subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            tail.append(line)
            phase = phase_of(line)
            fraction = fraction_done(line)
            if phase:
                if live and shown is not None:
                    print(file=out)  # end the line being kept up to date
                print(f"hearth: {phase}…", file=out, flush=True)
                shown = None
            elif fraction is not None:
                percent = int(fraction * 100)
                due = shown is None or percent >= shown + STEP or (percent == 100 != shown)
                if live or due:
                    elapsed = _clock(time.monotonic() - started)
                    text = f"hearth: building the engine {percent:3d}%  ({elapsed})"
                    print(f"\r{text}" if live else text, end="" if live else "\n", file=out)
                    out.flush()
                    shown = percent
        status = proc.wait()
    if live and shown is not None:
        print(file=out)
    if status != 0:
        print("hearth: the engine build failed; its last lines:", file=out)
        for line in tail:
            print(f"  | {line}", file=out)
    return status
