"""The size estimates are upper bounds, and cheap; the checks refuse what passes the limit."""

from __future__ import annotations

import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jinja2.utils import Namespace

from engine.chat.limits import (
    LimitExceeded,
    RenderLimits,
    binop_size_check,
    check_int_arguments,
    limits_in_force,
    printf_size,
    text_size,
)

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**300), max_value=10**300)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.binary(max_size=10)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_text_size_bounds_str(value):
    assert text_size(value, 10**9) >= len(str(value))
    assert text_size([value], 10**9) >= len(repr(value))  # nested: sized as a repr


def test_text_size_of_namespace_and_exotic_strings():
    tricky = ["\x00\U0010ffff\u2028é'\"\\" * 3, Namespace(a=["\x07"], b={"k": b"\xff"})]
    assert text_size(tricky, 10**9) >= len(str(tricky))
    assert text_size(tricky, 10**9) >= len(ascii(tricky))


def test_text_size_stops_at_the_budget_without_walking_everything():
    big = "x" * 1_000_000
    many = [big] * 1_000_000  # its text would be 10**12 characters
    started = time.perf_counter()
    assert text_size(many, 4_000_000) > 4_000_000
    assert time.perf_counter() - started < 0.05


def test_text_size_refuses_a_structure_that_contains_itself():
    ns = Namespace()
    ns["me"] = ns
    with pytest.raises(LimitExceeded):
        text_size(ns, 10**9)


_printf_cases = st.sampled_from(
    [
        ("%s", ("abc",)),
        ("%5s|%-7d|%08.3f", ("x", 42, 3.14159)),
        ("%*d and %.*f", (12, 7, 4, 2.5)),
        ("%r %a", ("é\n", ["\x00"])),
        ("%(name)s is %(age)d", {"name": "Ada", "age": 36}),
        ("100%% sure: %s", ([1, 2, 3],)),
        ("%c%c", (65, "z")),
        ("%e %g %x %o", (1e300, 1e-300, 255, 8)),
        ("%f", (1e308,)),
        ("%s", {"a": 1}),
    ]
)


@settings(max_examples=50, deadline=None)
@given(_printf_cases, st.integers(min_value=0, max_value=300))
def test_printf_size_bounds_the_result(case, width):
    template, values = case
    template = template.replace("%s", f"%{width}s", 1) if width else template
    assert printf_size(template, values, 10**9) >= len(template % values)


@given(st.text(max_size=20), st.text(max_size=20))
def test_printf_size_for_a_single_value(prefix, value):
    template = prefix.replace("%", "%%") + "%s"
    assert printf_size(template, value, 10**9) >= len(template % value)


@pytest.mark.parametrize(
    ("operator", "left", "right"),
    [
        ("*", "ab", 10**9),
        ("*", 10**9, [0]),
        ("*", 2**10_000, 2**10_000),
        ("**", 10, 10**10),
        ("**", -3, 100_000),
        ("+", "x" * 3_000_000, "y" * 3_000_000),
        ("+", [0] * 3_000_000, [0] * 3_000_000),
        ("%", "%999999999d", 1),
        ("%", "%*s", (10**9, "")),
    ],
)
def test_binop_refuses_a_result_past_the_limit(operator, left, right):
    with pytest.raises(LimitExceeded):
        binop_size_check(operator, left, right)


@pytest.mark.parametrize(
    ("operator", "left", "right"),
    [
        ("*", "ab", 1000),
        ("*", "ab", -5),
        ("*", 2**100, 2**100),
        ("**", 1, 10**100),
        ("**", -1, 10**100),
        ("**", 2, -(10**9)),
        ("**", 10, 300),
        ("+", "x" * 1000, "y"),
        ("%", "%5d", 1),
        ("%", 10**100, 7),
        ("-", 10**1000, 1),
    ],
)
def test_binop_allows_ordinary_arithmetic(operator, left, right):
    binop_size_check(operator, left, right)


def test_limits_in_force_are_per_render():
    with limits_in_force(RenderLimits(max_chars=10)), pytest.raises(LimitExceeded, match="is 10"):
        binop_size_check("*", "a", 11)
    binop_size_check("*", "a", 11)  # back to the defaults


def test_int_arguments():
    check_int_arguments((100_000, -100_000), {"width": 3})
    with pytest.raises(LimitExceeded):
        check_int_arguments((1,), {"width": 100_001})
    with pytest.raises(LimitExceeded):
        check_int_arguments((-(10**6),), {})


@given(st.integers(min_value=-(2**200), max_value=2**200))
def test_text_size_of_int_is_at_least_its_digits(number):
    assume(number != 0)
    assert text_size(number, 10**9) >= len(str(number))
