"""How long a model stays loaded after its last request: Ollama's `keep_alive`.

    keep_alive_seconds("5m", default=300.0)   # 300.0
    keep_alive_seconds(0, default=300.0)      # 0.0: unloaded as soon as the request ends
    keep_alive_seconds("-1", default=300.0)   # inf: never unloaded for idleness

As Ollama takes it: a number of seconds, or a duration string ("30s", "5m", "1h30m", "2.5h",
"500ms"); any negative value keeps the model loaded until the server stops. Pure.
"""

from __future__ import annotations

import math
import re

from engine.server.errors import APIError

MAX_KEEP_ALIVE_S = 10 * 365 * 24 * 3600.0  # past this, "until the server stops" is meant
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def keep_alive_seconds(value: str | float | int | None, default: float) -> float:
    """Seconds to keep the model loaded after a request (math.inf: until the server stops);
    APIError 400 for a value that is no duration."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise APIError(400, _wrong(value), param="keep_alive")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        seconds = _duration_seconds(str(value).strip())
    if math.isnan(seconds):
        raise APIError(400, _wrong(value), param="keep_alive")
    if seconds < 0 or seconds > MAX_KEEP_ALIVE_S:
        return math.inf
    return seconds


def _duration_seconds(text: str) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    try:
        return sign * float(body)  # a bare number is seconds
    except ValueError:
        pass
    parts = _PART.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body:
        raise APIError(400, _wrong(text), param="keep_alive")
    return sign * sum(float(n) * _UNIT_S[u] for n, u in parts)


def _wrong(value) -> str:
    return (
        f"keep_alive {str(value)[:40]!r} is not a duration: send seconds (300), a duration such "
        "as '5m' or '1h30m', 0 to unload after the request, or -1 to keep the model loaded."
    )


def describe_keep_alive(seconds: float) -> str:
    """ "5m", "30s", "until the server stops": for the console and the Server page."""
    if math.isinf(seconds):
        return "until the server stops"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
