"""Download rate and time left, smoothed so the numbers shown do not jump at every chunk."""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.hub.records import Progress


class RateMeter:
    """Bytes per second over a sliding window of recent samples."""

    def __init__(self, window_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self._clock = clock
        self._samples: list[tuple[float, int]] = []

    def add(self, done_bytes: int) -> None:
        now = self._clock()
        self._samples.append((now, done_bytes))
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
            self._samples.pop(0)

    def rate(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        if t1 - t0 < 0.2:  # too short to say anything
            return None
        return max(0.0, (b1 - b0) / (t1 - t0))

    def progress(self, phase: str, done: int, total: int) -> Progress:
        rate = self.rate()
        eta = (total - done) / rate if rate else None
        return Progress(phase, done, total, rate, eta)
