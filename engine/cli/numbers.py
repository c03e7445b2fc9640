"""Range-checked numbers for the CLI's options, as argparse `type=` functions.

A number the engine cannot use must fail at the command line with the range it should be in,
not reach llama.cpp: there `--ctx 1099511627776` wraps to 0 in a 32-bit field (and silently
means "the model's own length"), and `--ctx 0` or `-5` fail deep in the load with a misleading
"probably not enough memory".
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

UINT32_MAX = 2**32 - 1
INT32_MAX = 2**31 - 1
# The longest context any published GGUF declares is 10M tokens (Llama 4 Scout); 2^24 leaves
# room above it and is far below where llama.cpp's 32-bit token counts overflow.
MAX_CONTEXT_TOKENS = 2**24
# llama.cpp pads a context to 256 tokens; below 64 not even a chat template and a reply fit.
MIN_CONTEXT_TOKENS = 64
MAX_MEMORY_GIB = 1 << 20  # a mebibyte of gibibytes: above any machine, below float trouble


def int_in_range(low: int, high: int, *, also: tuple[int, ...] = ()) -> Callable[[str], int]:
    """A whole number from `low` to `high`, or one of `also` (such as -1 for "all")."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value in also or low <= value <= high:
            return value
        extra = "".join(f" (or {v})" for v in also)
        raise argparse.ArgumentTypeError(f"{value} is out of range: use {low} to {high:,}{extra}")

    return parse


def float_in_range(low: float, high: float) -> Callable[[str], float]:
    """A finite number from `low` to `high` (nan and inf refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if math.isfinite(value) and low <= value <= high:
            return value
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: use {_shown(low)} to {_shown(high)}"
        )

    return parse


def _shown(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:g}"


context_tokens = int_in_range(MIN_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS)
tcp_port = int_in_range(1, 65535)
# llama.cpp starts every thread it is told to: 100,000 of them ended in a segfault at the load.
MAX_THREADS = 1024
threads = int_in_range(0, MAX_THREADS)
memory_gib = float_in_range(1 / 1024, MAX_MEMORY_GIB)
gpu_layers = int_in_range(0, INT32_MAX - 1, also=(-1,))
seed = int_in_range(0, UINT32_MAX)  # llama.cpp's seed is a uint32; its default is UINT32_MAX
