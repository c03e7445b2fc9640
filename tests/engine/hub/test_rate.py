"""Rate and time left, with a clock the test moves."""

from __future__ import annotations

from engine.hub.rate import RateMeter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_and_eta_over_a_sliding_window() -> None:
    clock = Clock()
    meter = RateMeter(window_s=5.0, clock=clock)
    meter.add(0)
    assert meter.progress("downloading", 0, 1000).rate_bps is None  # one sample says nothing
    for _ in range(10):
        clock.now += 1.0
        meter.add(int((clock.now - 100.0) * 10))  # 10 bytes a second
    progress = meter.progress("downloading", 100, 1000)
    assert progress.rate_bps == 10.0 and progress.eta_s == 90.0
    assert progress.fraction == 0.1
    for _ in range(6):  # then 100 bytes a second: the old samples leave the window
        clock.now += 1.0
        meter.add(meter._samples[-1][1] + 100)
    assert meter.rate() == 100.0
