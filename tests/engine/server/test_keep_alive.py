"""Ollama's keep_alive, read as Ollama reads it (engine/server/keep_alive.py), by table."""

import math

import pytest

from engine.server.errors import APIError
from engine.server.keep_alive import describe_keep_alive, keep_alive_seconds


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        (None, 300.0), ("", 300.0),  # not said: the server's default
        (0, 0.0), ("0", 0.0), ("0s", 0.0),  # unloaded as the request ends
        (45, 45.0), (2.5, 2.5), ("30", 30.0), ("30s", 30.0), ("5m", 300.0),
        ("1h30m", 5400.0), ("2.5h", 9000.0), ("500ms", 0.5), ("1m30s", 90.0),
        (-1, math.inf), ("-1", math.inf), ("-1m", math.inf),  # kept until the server stops
        (1e30, math.inf),
    ],
)  # fmt: skip
def test_durations(given, seconds):
    assert keep_alive_seconds(given, default=300.0) == seconds


@pytest.mark.parametrize("given", ["soon", "5 m", "m5", "5d", "1h-3m", "nan", True, float("nan")])
def test_what_is_no_duration_is_refused_with_what_to_send(given):
    with pytest.raises(APIError) as caught:
        keep_alive_seconds(given, default=300.0)
    assert caught.value.status == 400 and "'5m'" in caught.value.message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300.0, "5m"), (30.0, "30s"), (90.0, "90s"), (math.inf, "until the server stops")],
)
def test_described(seconds, text):
    assert describe_keep_alive(seconds) == text
