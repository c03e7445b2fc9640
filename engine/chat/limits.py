"""Render limits for chat templates, and estimates made *before* an allocation.

A check after the fact cannot stop `'a' * 10**10`: the allocation is the attack. So each operation
a template can use to make a value much larger than its inputs is sized first, from its inputs, and
refused when the result would pass the limit:

- repetition and arithmetic (`*`, `**`, `+`, `%`): `binop_size_check`;
- conversion to text (`{{ x }}`, `~`, `|string`, `%s`, `{}`): `text_size`, an upper bound on
  `len(str(x))` that walks containers without building the text and stops at the budget;
- printf formatting (`'%*d' % (n, 1)`, `|format`): `printf_size`;
- integers passed to C functions and filters (widths, counts: `center`, `zfill`, `to_bytes`):
  `check_int_arguments`.

Every value a call, filter or operator returns is measured again afterwards (`check_value_size`),
so no input to the next operation is past the limit either.

The limits in force are per render and live in a context variable, because Jinja calls the
sandbox hooks without a way to pass them along.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import chain, repeat

from jinja2.runtime import Undefined
from jinja2.utils import Namespace

# Jinja's own sandbox caps range() at 100,000 items; a template has no reason to pass a larger
# width or count to anything else either.
MAX_SIZE_ARGUMENT = 100_000
# 16,384 bits is about 4,900 decimal digits, past what Python will even print (4,300 by default).
MAX_INT_BITS = 16_384
# The largest indent `tojson` accepts; HF templates use 2 or 4.
MAX_JSON_INDENT = 64


class LimitExceeded(BaseException):
    """A template went past a render limit.

    A BaseException on purpose: Jinja and the filters catch `Exception` in places (constant
    folding, `getitem`), and a limit must stop the render, not be swallowed and retried.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RenderLimits:
    timeout_s: float = 2.0
    max_chars: int = 4_000_000  # a prompt of roughly a million tokens
    max_memory_bytes: int = 256 * 1024 * 1024


_DEFAULT_LIMITS = RenderLimits()
_active: ContextVar[RenderLimits] = ContextVar("hearth_chat_render_limits")


def active_limits() -> RenderLimits:
    return _active.get(_DEFAULT_LIMITS)


@contextlib.contextmanager
def limits_in_force(limits: RenderLimits) -> Iterator[None]:
    token = _active.set(limits)
    try:
        yield
    finally:
        _active.reset(token)


def check_chars(size: int, what: str, unit: str = "characters") -> None:
    if size > (limit := _active.get(_DEFAULT_LIMITS).max_chars):
        raise LimitExceeded(f"it would build {what} of {size:,} {unit} (the limit is {limit:,})")


def check_int_bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise LimitExceeded(f"it would compute a number of about {bits:,} bits")


def check_int_arguments(args: tuple, kwargs: Mapping[str, object]) -> None:
    """Refuse an integer argument larger than any width or count a template has use for."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and abs(value) > MAX_SIZE_ARGUMENT:
            raise LimitExceeded(
                f"it passed {value:,} as an argument (the limit is {MAX_SIZE_ARGUMENT:,})"
            )


def size_of(value: object) -> int:
    """The size of a value that already exists: its length, or an int's decimal digits."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return value.bit_length() * 30103 // 100000 + 1
    if isinstance(value, str | bytes | bytearray | list | tuple | dict | set | frozenset):
        return len(value)
    return 0


def check_value_size(value: object) -> None:
    if isinstance(value, int) and not isinstance(value, bool):
        check_int_bits(value.bit_length())
    else:
        check_chars(size_of(value), "a value")


# -- how long str() of a value would be, without building it ------------------------------------

_DEFAULT_OBJECT_TEXT = 256  # `<jinja2.utils.Cycler object at 0x7f...>` and the like
# Python's repr() fails near 1,000 levels anyway; a self-containing namespace never ends
_MAX_TEXT_DEPTH = 500


def _nested_str_size(text: str) -> int:
    # repr() inside a container: quotes, and escapes of up to 10 characters each (\U0001f600)
    if text.isascii() and text.isprintable():
        return 2 * len(text) + 2  # every backslash or quote could double
    return 10 * len(text) + 2


def text_size(value: object, budget: int) -> int:
    """An upper bound on `len(str(value))`, or any number above `budget` once it is passed.

    Walks containers depth first, lazily, and stops at the budget: a list holding the same
    large string 100,000 times costs a few steps, not the 10**11 characters its text would be.
    """
    total = 0
    pending: list[Iterator[tuple[object, bool]]] = [iter(((value, False),))]
    while pending:
        for item, nested in pending[-1]:
            size, inside = _text_step(item, nested)
            total += size
            if total > budget:
                return total
            if inside is not None:
                if len(pending) >= _MAX_TEXT_DEPTH:
                    raise LimitExceeded(f"it would print values nested over {_MAX_TEXT_DEPTH} deep")
                pending.append(zip(inside, repeat(True)))
                break
        else:
            pending.pop()
    return total


def _text_step(item: object, nested: bool) -> tuple[int, Iterable[object] | None]:
    """What `item` adds to a text by itself, and the items inside it that add the rest."""
    if isinstance(item, str):
        return (_nested_str_size(item) if nested else len(item)), None
    if item is None or isinstance(item, bool | float):
        return 32, None
    if isinstance(item, int):
        return size_of(item) + 1, None
    if isinstance(item, list | tuple | set | frozenset):
        return 16 + 4 * len(item), item
    if isinstance(item, Mapping):
        return 16 + 4 * len(item), chain.from_iterable(item.items())
    if isinstance(item, Namespace):
        return 16, (object.__getattribute__(item, "_Namespace__attrs"),)
    if isinstance(item, bytes | bytearray):
        return 4 * len(item) + 14, None
    if isinstance(item, Undefined):
        return (32 if nested else 0), None
    return _DEFAULT_OBJECT_TEXT, None


def check_text_size(value: object, what: str) -> int:
    limit = _active.get(_DEFAULT_LIMITS).max_chars
    size = text_size(value, limit)
    check_chars(size, what)
    return size


# -- printf formatting: `'%s' % x` and `|format` -------------------------------------------------

_PRINTF_SPEC = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d*))?[hlL]?"
    r"(?P<conversion>.)",
    re.DOTALL,
)
# '%f' % 1e308 is 316 characters: room for the longest plain number, sign and exponent
_NUMBER_TEXT = 330


def printf_size(template: str, values: object, budget: int) -> int:
    """An upper bound on `len(template % values)`, pairing each `%` field with its value."""
    positional = list(values) if isinstance(values, tuple) else [values]
    mapping = values if isinstance(values, Mapping) else None
    next_value = 0
    total = len(template)

    def take() -> object:
        nonlocal next_value
        value = positional[next_value] if next_value < len(positional) else None
        next_value += 1
        return value

    for match in _PRINTF_SPEC.finditer(template):
        field = 0
        for part in (match["width"], match["precision"]):
            if part == "*":
                star = take()
                field += abs(star) if isinstance(star, int) else 0
            elif part:
                field += int(part)
        if match["conversion"] == "%":
            total += field + 1
            continue
        if match["key"] is not None:
            value = mapping.get(match["key"]) if mapping is not None else None
        else:
            value = take()
        nested = match["conversion"] in "ra"
        total += field + _NUMBER_TEXT + text_size([value] if nested else value, budget)
        if total > budget:
            return total
    return total


# -- arithmetic and repetition ------------------------------------------------------------------

_SEQUENCES = (str, bytes, list, tuple)


def _is_int(value: object) -> bool:
    return isinstance(value, int)


def _repeated(value: object) -> tuple[str, str]:
    if isinstance(value, list | tuple):
        return "a repeated list", "items"
    return "a repeated text", "characters"


def binop_size_check(operator: str, left: object, right: object) -> None:
    """Refuse `left <operator> right` when its result would pass a limit; do not compute it."""
    if operator == "*":
        if _is_int(left) and _is_int(right):
            check_int_bits(left.bit_length() + right.bit_length())
        elif isinstance(left, _SEQUENCES) and _is_int(right):
            check_chars(len(left) * max(right, 0), *_repeated(left))
        elif isinstance(right, _SEQUENCES) and _is_int(left):
            check_chars(len(right) * max(left, 0), *_repeated(right))
    elif operator == "**":
        if _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
            check_int_bits(left.bit_length() * right)
    elif operator == "+":
        if _is_int(left) and _is_int(right):
            check_int_bits(max(left.bit_length(), right.bit_length()) + 1)
        elif isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
            check_chars(len(left) + len(right), "a joined value")
    elif operator == "%" and isinstance(left, str):
        limit = _active.get(_DEFAULT_LIMITS).max_chars
        check_chars(printf_size(left, right, limit), "a formatted text")
