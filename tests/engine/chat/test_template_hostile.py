"""A hostile chat template (one that tries to reach Python objects) is refused, and runs nothing.

Each template below is a known way out of a Jinja sandbox, or a step towards one. CVE-2024-34359
was the first, in a plain Environment, against llama-cpp-python. Where a template would run a
command if it got out, the command creates a file, and the test checks that the file is absent.
"""

from __future__ import annotations

import pytest

from engine.chat import ChatTemplateError, render_chat_template
from tests.engine.chat.templates import TWO_TURNS

ESCAPES = [
    # CVE-2024-34359's route: from a string to every class in the interpreter
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__ }}",  # stock Jinja prints "" for this; here it is refused
    "{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('touch {marker}').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('touch {marker}').read() }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.system('touch {marker}') }}",  # noqa: E501
    "{{ self._TemplateReference__context }}",
    "{{ lipsum.__globals__['os'].popen('touch {marker}') }}",
    "{{ lipsum.__globals__ }}",
    "{{ joiner.__init__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ raise_exception.__globals__ }}",
    "{{ strftime_now.__globals__['datetime'] }}",
    "{{ ''.format.__self__ }}",
    "{{ messages.append(1) }}",
    "{{ messages[0].update({'role': 'system'}) }}",
    "{{ messages.__len__() }}",
    "{{ messages[0]['__class__'] }}",
    "{{ ''|attr('__class__') }}",
    "{{ ('{0.__class__.__init__.__globals__}'|attr('format'))(cycler) }}",
    "{{ '{0.__class__.__mro__}'.format(1) }}",
    "{{ '{c.__init__.__globals__}'.format_map({'c': cycler}) }}",
    "{{ namespace.mro() }}",
    "{{ (messages|map('string')).gi_frame.f_globals }}",
    "{{ (messages|map('string')).gi_yieldfrom }}",
    "{% for m in messages %}{{ loop.__class__ }}{% endfor %}",
    "{% set j = joiner() %}{{ j.__call__.__globals__ }}",
    "{% macro m() %}{% endmacro %}{{ m._func.__globals__ }}",
    "{{ range.__self__ }}",
    "{{ dict.__subclasses__() }}",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_hostile_template_is_refused_and_runs_nothing(source, tmp_path):
    marker = tmp_path / "escaped"
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(source.replace("{marker}", str(marker)), TWO_TURNS)
    assert caught.value.kind == "unsafe"
    assert not marker.exists()


def test_refusal_says_it_was_unsafe_and_what_to_do(tmp_path):
    marker = tmp_path / "escaped"
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(
            f"{{{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}}}", TWO_TURNS
        )
    message = str(caught.value)
    assert caught.value.kind == "unsafe"
    assert "'__init__'" in message
    assert "may be malicious" in message and "built-in chat format" in message
    assert not marker.exists()


def test_stock_jinja_would_have_let_the_first_step_through():
    """Why `unsafe_undefined` raises: in stock Jinja's sandbox an unsafe attribute is merely
    undefined, so a probing template renders quietly instead of failing."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert ImmutableSandboxedEnvironment().from_string("{{ ''.__class__ }}").render() == ""
    with pytest.raises(ChatTemplateError):
        render_chat_template("{{ ''.__class__ }}", [])


def test_no_loader_so_no_include_extends_or_import():
    for source in ("{% include 'x' %}", "{% extends 'x' %}", "{% import 'x' as y %}"):
        with pytest.raises(ChatTemplateError):
            render_chat_template(source, TWO_TURNS)


def test_dunder_keys_still_work_through_subscripts_on_plain_data():
    # the refusal is for attributes; a message's own data stays reachable by key
    messages = [{"role": "user", "content": "x", "_meta": "kept"}]
    assert render_chat_template("{{ messages[0]['_meta'] }}", messages) == "kept"
