"""Lines for `hearth serve`'s console that can never fail a request.

The request log is written from the event loop as each request ends. A console that went away
(`hearth serve | head -1`, a closed terminal) makes `print` raise BrokenPipeError there, inside
the request's own handling, which turned every reply into a 500. A line that cannot be written
is dropped, and the console is not tried again.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO


class Console:
    def __init__(self, stream: TextIO | None = None):
        self._stream = stream
        self.closed = False

    def line(self, text: str) -> None:
        if self.closed:
            return
        stream = self._stream or sys.stdout
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # BrokenPipeError, or a stream already closed
            self.closed = True
            _quiet_at_exit(stream)


def _quiet_at_exit(stream: TextIO) -> None:
    """Point the broken stream at /dev/null, so that Python's flush at exit does not print
    an 'Exception ignored' traceback for the same broken pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
