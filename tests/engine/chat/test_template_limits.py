"""Runaway templates stop within their time limit, and huge values are refused before they exist."""

from __future__ import annotations

import sys
import time
import tracemalloc

import pytest

from engine.chat import ChatTemplateError, render_chat_template
from engine.chat.template import MAX_TEMPLATE_CHARS
from tests.engine.chat.templates import CHATML, TWO_TURNS

# Generous: other tests may share the two cores. Without the limits each case below runs for
# minutes, or tries to allocate gigabytes.
MARGIN_S = 1.5
MIB = 1024 * 1024

RUNAWAY_LOOPS = {
    "nested ranges, empty body": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    ),
    "nested ranges, loop variable": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ loop.index }}"
        "{% endfor %}{% endfor %}"
    ),
    "filtered loop that never yields": (
        "{% for i in range(100000) %}{% for j in range(100000) if j < 0 %}{% endfor %}{% endfor %}"
    ),
    "in a macro": (
        "{% macro spin() %}{% for i in range(100000) %}{% for j in range(100000) %}"
        "{% endfor %}{% endfor %}{% endmacro %}{{ spin() }}"
    ),
    "in a set block": (
        "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
        "{% endfor %}{% endset %}"
    ),
    "recursive loop": (
        "{% for m in messages recursive %}{% for i in range(100000) %}{% endfor %}"
        "{{ loop(messages) }}{% endfor %}"
    ),
    "filters over a big string": (
        "{% set big = 'ab' * 1000000 %}{% for i in range(100000) %}"
        "{{ big|unique|list|length }}{% endfor %}"
    ),
}


@pytest.mark.parametrize("source", RUNAWAY_LOOPS.values(), ids=RUNAWAY_LOOPS.keys())
def test_runaway_loop_stops_within_the_time_limit(source):
    timeout_s = 0.5
    started = time.monotonic()
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(source, TWO_TURNS, timeout_s=timeout_s)
    elapsed = time.monotonic() - started
    assert caught.value.kind == "limit"
    assert elapsed < timeout_s + MARGIN_S
    if "recursed" not in caught.value.reason:
        assert "took longer than 0.5 s" in str(caught.value)


# Unguarded, each of these would allocate 1 GB or more (the brief's three examples: 10 GB, and
# forever), but not so much more that a regression would exhaust the test machine's memory.
HUGE_VALUES = {
    "string repetition": "{{ 'a' * 10**10 }}",
    "tower of powers": "{{ 10**10**10 }}{{ 10**(10**10) }}",
    "center filter": '{{ "x"|center(10**10) }}',
    "list repetition": "{{ [0] * 3 * 10**8 }}",
    "repeated squaring": "{% set ns = namespace(n=3) %}{% for i in range(64) %}"
    "{% set ns.n = ns.n * ns.n %}{% endfor %}",
    "center method": "{{ 'x'.center(10**9) }}",
    "zfill": "{{ '1'.zfill(10**9) }}",
    "to_bytes": "{{ (1).to_bytes(10**9, 'big') }}",
    "range with colliding numbers": "{{ dict.fromkeys(range(0, 2**70, 2**61 - 1)) }}",
    "doubling with ~": "{% set ns = namespace(s='x') %}{% for i in range(31) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "doubling with +": "{% set ns = namespace(s='x') %}{% for i in range(31) %}"
    "{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "printf width": "{{ '%*d' % (10**9, 1) }}",
    "printf literal width": "{{ '%999999999d' % 1 }}",
    "printf repeated field": "{% set big = 'x' * 1000000 %}"
    "{{ '%(a)s%(a)s%(a)s%(a)s%(a)s%(a)s%(a)s%(a)s' % {'a': big} }}",
    "format filter": "{{ '%999999999s'|format('x') }}",
    "str.format width": "{{ '{:>999999999}'.format(1) }}",
    "str.format nested width": "{{ '{:>{}}'.format(1, 10**9) }}",
    "str.format repeated field": "{% set big = 'x' * 1000000 %}"
    "{{ '{0}{0}{0}{0}{0}{0}{0}{0}'.format(big) }}",
    "replace filter": "{% set big = 'x' * 30000 %}{{ big|replace('x', big) }}",
    "replace method": "{% set big = 'x' * 30000 %}{{ big.replace('', big) }}",
    "join filter separator": "{% set big = 'x' * 1000000 %}{{ range(2000)|join(big) }}",
    "join method": "{% set big = 'x' * 1000000 %}{{ big.join(['a'] * 2000) }}",
    "join of one value many times": "{% set big = 'x' * 1000000 %}{{ ([big] * 2000)|join }}",
    "printing one value many times": "{% set big = 'x' * 1000000 %}{{ [big] * 2000 }}",
    "indent by a string": "{% set big = 'x' * 1000000 %}{{ ('a\n' * 2000)|indent(big) }}",
    "expandtabs": "{{ ('\t' * 20000).expandtabs(100000) }}",
    "expandtabs by keyword": "{{ ('\t' * 20000).expandtabs(tabsize=100000) }}",
    "center on markup": "{{ ('x'|safe).center(10**9) }}",
    "join on markup": "{% set big = 'x' * 1000000 %}{{ (big|safe).join(['a'] * 2000) }}",
    "translate by a list": "{% set big = 'x' * 40000 %}{{ big.translate([big] * 200) }}",
    "translate": "{% set big = 'x' * 40000 %}{{ big.translate({120: big}) }}",
    "tojson indent": "{{ messages|tojson(indent=10**8) }}",
    "macro output many times": "{% set big = 'x' * 1000000 %}{% macro m() %}"
    "{% for i in range(2000) %}{{ big }}{% endfor %}{% endmacro %}{{ m() }}",
    "set block": "{% set big = 'x' * 1000000 %}{% set x %}"
    "{% for i in range(2000) %}{{ big }}{% endfor %}{% endset %}",
    "sum of lists": "{% set big = 'x' * 1000 %}{{ ([[big] * 1000] * 100000)|sum(start=[]) }}",
    "raise_exception with a huge message": "{% set big = 'x' * 1000000 %}"
    "{{ raise_exception([big] * 2000) }}",
}


@pytest.mark.parametrize("source", HUGE_VALUES.values(), ids=HUGE_VALUES.keys())
def test_huge_value_is_refused_before_it_is_built(source):
    tracemalloc.start()
    try:
        started = time.monotonic()
        with pytest.raises(ChatTemplateError) as caught:
            render_chat_template(source, TWO_TURNS, timeout_s=1.0)
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.kind == "limit"
    assert peak < 48 * MIB  # each case asks for gigabytes; the 1 MB strings are the largest
    assert elapsed < 1.0 + MARGIN_S


def test_output_limit_counts_the_whole_prompt():
    messages = [{"role": "user", "content": "x" * 1000}] * 50  # about 51,000 characters
    assert len(render_chat_template(CHATML, messages, max_output_chars=60_000)) > 50_000
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(CHATML, messages, max_output_chars=40_000)
    assert caught.value.kind == "limit"
    assert "the limit is 40,000" in str(caught.value)


def test_many_values_each_within_limits_hit_the_memory_ceiling():
    # 1,000 distinct 1 MB strings kept alive: 1 GB if nothing stopped it
    source = (
        "{% set big = 'x' * 1000000 %}{% set ns = namespace(d={}) %}"
        "{% for i in range(1000) %}{% set ns.d = dict(ns.d, **{('k' ~ i): big ~ i}) %}"
        "{% endfor %}{{ ns.d|length }}"
    )
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError) as caught:
            render_chat_template(source, [], timeout_s=30, max_memory_bytes=64 * MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "more than 64 MiB of memory" in caught.value.reason
    assert peak < 400 * MIB


def test_deep_recursion_is_a_limit_not_a_crash():
    source = "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}"
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(source, [])
    assert caught.value.kind == "limit"


def test_printing_a_namespace_that_contains_itself():
    source = "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(source, [], timeout_s=1.0)
    assert caught.value.kind == "limit"


def test_an_over_long_template_is_refused_without_compiling():
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template("x" * (MAX_TEMPLATE_CHARS + 1), [])
    assert caught.value.kind == "limit"


def test_within_limits_big_values_are_fine():
    source = "{% set big = 'x' * 1000000 %}{{ big|length }} {{ 'x'.center(1000)|length }}"
    assert render_chat_template(source, []) == "1000000 1000"


def test_the_previous_trace_function_is_restored():
    events = []

    def previous(frame, event, arg):
        events.append(event)

    sys.settrace(previous)
    try:
        render_chat_template(CHATML, TWO_TURNS)
        assert sys.gettrace() is previous
        with pytest.raises(ChatTemplateError):  # raising from inside the watchdog
            render_chat_template("{% for i in range(100000) %}{% for j in range(100000) %}"
                                 "{% endfor %}{% endfor %}", [], timeout_s=0.2)  # fmt: skip
        assert sys.gettrace() is previous
    finally:
        sys.settrace(None)
    assert events  # it kept tracing in between


def test_rendering_is_cheap_enough_to_run_every_turn():
    messages = [
        {"role": ("user", "assistant")[i % 2], "content": "word " * 200} for i in range(200)
    ]
    render_chat_template(CHATML, messages)  # compiles once
    started = time.perf_counter()
    for _ in range(5):
        render_chat_template(CHATML, messages)
    assert (time.perf_counter() - started) / 5 < 0.25  # a few ms on a laptop
