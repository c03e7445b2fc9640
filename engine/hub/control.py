"""A stop flag shared by the thread that downloads and the one that asks it to stop."""

from __future__ import annotations

import threading

PAUSE = "pause"
CANCEL = "cancel"


class StopFlag:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        if reason not in (PAUSE, CANCEL):
            raise ValueError(f"stop reason must be {PAUSE!r} or {CANCEL!r}, not {reason!r}")
        if self.reason != CANCEL:  # a cancel is never downgraded to a pause
            self.reason = reason
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def sleep(self, seconds: float) -> bool:
        """Wait up to `seconds` (a retry's backoff); True when a stop was asked meanwhile."""
        return self._event.wait(seconds)
