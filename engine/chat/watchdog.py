"""A deadline and a memory ceiling for Python code running on this thread.

`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}` calls nothing
that a sandbox hook could refuse: it just runs. So while a template compiles and renders, a trace
function (`sys.settrace`, this thread only) checks the clock at every Python call; every loop in
a template makes one call per iteration (see `BoundedSandbox`), so no loop escapes it. Every few
milliseconds it also checks how much anonymous memory the process holds, which catches a template
that keeps many values alive (each within the size limit) rather than making one too large.

The previous trace function (a debugger, coverage.py) is put back afterwards. Python turns tracing
off for the thread when a trace function raises, which is fine: the raise ends the render.

What this cannot interrupt is a single call into C (one `sorted`, one `str.replace`): those run to
completion. The size limits keep their inputs small enough that they finish in well under a second.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from engine.chat.limits import LimitExceeded, RenderLimits

_MEMORY_CHECK_INTERVAL_S = 0.005
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def anonymous_memory_bytes() -> int:
    """Memory the process holds that is not backed by a file.

    A loaded model is memory-mapped from its file, and decoding pages it in: counting those
    pages would blame the template for the model. On Linux /proc/self/statm separates them
    (resident minus file-backed); elsewhere psutil's resident size is the best cheap number.
    """
    try:
        with open("/proc/self/statm", "rb") as statm:
            fields = statm.read().split()
        return (int(fields[1]) - int(fields[2])) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        import psutil

        return psutil.Process().memory_info().rss


def _stopper(limits: RenderLimits) -> Callable[[], float]:
    """A check to run when the clock passes the time it last returned: it raises past the
    deadline or the memory ceiling, and otherwise returns when it next needs to run."""
    deadline = time.monotonic() + limits.timeout_s
    memory_ceiling = anonymous_memory_bytes() + limits.max_memory_bytes

    def check() -> float:
        now = time.monotonic()
        if now > deadline:
            raise LimitExceeded(f"it took longer than {limits.timeout_s:g} s to render")
        if anonymous_memory_bytes() > memory_ceiling:
            mib = limits.max_memory_bytes / (1024 * 1024)
            raise LimitExceeded(f"it used more than {mib:,.0f} MiB of memory")
        return min(deadline, now + _MEMORY_CHECK_INTERVAL_S)

    return check


@contextlib.contextmanager
def watchdog(limits: RenderLimits) -> Iterator[None]:
    """Raise LimitExceeded inside the body once it runs past the time or memory limit.

    The check runs at every Python call; it never traces lines, which keeps it to a fraction of
    a microsecond per call. A template's loops call Python on every iteration (BoundedSandbox
    compiles them that way), and so do Jinja's filters for every item they process.
    """
    check = _stopper(limits)
    next_check = check()
    monotonic = time.monotonic

    def on_call(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal next_check
        if monotonic() >= next_check:
            next_check = check()

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)
