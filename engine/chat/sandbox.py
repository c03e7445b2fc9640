"""The Jinja environment chat templates run in: HF-compatible, immutable, sandboxed and bounded.

It is jinja2's ImmutableSandboxedEnvironment (no attribute starting with `_`, no Python
internals, no method that mutates a list, dict or set), configured like Hugging Face
transformers' `apply_chat_template` (trim_blocks, lstrip_blocks, loop controls, the
`{% generation %}` tag, `raise_exception`, `strftime_now`, a `tojson` without HTML escaping), with
these changes:

- an unsafe attribute is an error at once. Stock Jinja returns an undefined value that prints
  as an empty string, so `{{ ''.__class__ }}` would quietly render; here it fails the render.
- every place a value can grow is sized before it is built (see `engine.chat.limits`): the
  `* ** + %` operators, `~` (through a code generator that calls `join_checked`), the buffers
  of macros, blocks and `{% set %}` blocks (`concat`), every `{{ }}` output (`finalize`),
  `str.format`, every C function or method a template calls, and every filter.
- constant folding at compile time is off (`optimized=False`, and `finalize` takes the eval
  context), so compiling a template never runs a filter on its constants.
- `lipsum`, `pprint`, `urlize` and `wordwrap` are removed: no chat template uses them and each
  is a way to multiply a value's size.
"""

from __future__ import annotations

import copy
import functools
import json
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from itertools import chain
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes, pass_eval_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import FILTERS, do_format, do_indent, do_replace, make_attrgetter, sync_do_join
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
    SecurityError,
    safe_range,
)
from jinja2.utils import Namespace, _PassArg
from markupsafe import Markup, soft_str

from engine.chat.limits import (
    MAX_JSON_INDENT,
    LimitExceeded,
    active_limits,
    binop_size_check,
    check_chars,
    check_int_arguments,
    check_text_size,
    check_value_size,
    printf_size,
    size_of,
    text_size,
)


class TemplateRaised(Exception):
    """The template called `raise_exception(message)`."""


# -- the globals HF templates use ---------------------------------------------------------------

_MAX_STRFTIME_FORMAT = 200


def raise_exception(message: object = "") -> None:
    check_text_size(message, "an error message")
    raise TemplateRaised(str(message))


def strftime_now(format: str) -> str:  # HF's parameter name
    if len(format) > _MAX_STRFTIME_FORMAT:
        raise LimitExceeded("it passed an over-long date format to strftime_now")
    return datetime.now().strftime(format)


def tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """HF's `tojson` (json.dumps, no HTML escaping), encoded in pieces so its size is bounded."""
    width = indent if isinstance(indent, int) or indent is None else len(str(indent))
    if width is not None and width > MAX_JSON_INDENT:
        raise LimitExceeded(f"it asked tojson for an indent over {MAX_JSON_INDENT}")
    encoder = json.JSONEncoder(
        ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )
    pieces: list[str] = []
    total = 0
    for piece in encoder.iterencode(value):
        total += len(piece)
        check_chars(total, "a JSON text")
        pieces.append(piece)
    return "".join(pieces)


# -- filters: each bounded ----------------------------------------------------------------------

_REMOVED_FILTERS = {"pprint", "urlize", "wordwrap"}
# filters whose integer arguments are values, not widths or counts
_INT_VALUES_ALLOWED = {"default", "d", "format"}


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    leading = 1 if _PassArg.from_obj(func) is not None else 0  # context, eval_ctx or environment
    check_ints = name not in _INT_VALUES_ALLOWED

    @functools.wraps(func)  # keeps `jinja_pass_arg`
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if check_ints:
            check_int_arguments(args[leading + 1 :], kwargs)
        result = func(*args, **kwargs)
        check_value_size(result)
        return result

    return bounded


def _joined_size(items: list[Any], separator: object, budget: int) -> int:
    total = text_size(separator, budget) * max(len(items) - 1, 0)
    for item in items:
        total += text_size(item, budget)
        if total > budget:
            break
    return total


@pass_eval_context
def _join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    items = list(value)
    check_chars(_joined_size(items, d, active_limits().max_chars), "a joined text")
    return sync_do_join(eval_ctx, items, d, attribute)


def _replaced_size(text: str, old: str, new: object, count: int | None) -> int:
    hits = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        hits = min(hits, count)
    budget = active_limits().max_chars
    return len(text) + hits * max(text_size(new, budget) - len(old), 0)


@pass_eval_context
def _replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> str:
    text, old_text = str(s), str(old)
    check_chars(_replaced_size(text, old_text, new, count), "a replaced text")
    return do_replace(eval_ctx, s, old, new, count)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    budget = active_limits().max_chars
    check_chars(printf_size(str(value), kwargs or args, budget), "a formatted text")
    return do_format(value, *args, **kwargs)


def _indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = str(s)
    prefix = width if isinstance(width, int) else len(str(width))
    check_chars(len(text) + (text.count("\n") + 1) * prefix, "an indented text")
    return do_indent(s, width, first, blank)


def _string(value: Any) -> str:
    check_text_size(value, "a text")
    return soft_str(value)


@jinja2.pass_environment
def _sum(environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    items = list(iterable)
    if attribute is not None:
        getter = make_attrgetter(environment, attribute)
        items = [getter(item) for item in items]
    if not isinstance(start, list | tuple):
        return sum(items, start)
    # Joining lists: Python's sum() copies the running total at every step, quadratic time in
    # one C call; chaining gives what the repeated `+` would, in linear time.
    check_chars(len(start) + sum(size_of(item) for item in items), "a summed list", "items")
    for item in items:
        if type(item) is not type(start):
            raise TypeError(f"can only add {type(start).__name__} to {type(start).__name__}")
    return type(start)(chain(start, *items))


def bounded_range(*args: int) -> range:
    """Jinja's sandboxed range (at most 100,000 items), with bounded numbers too: a range of
    huge multiples of 2**61 - 1 would all hash alike and make dict building quadratic."""
    check_int_arguments(args, {})
    return safe_range(*args)


def _bounded_filters() -> dict[str, Callable[..., Any]]:
    filters = {name: f for name, f in FILTERS.items() if name not in _REMOVED_FILTERS}
    filters.update(
        join=_join,
        replace=_replace,
        format=_format,
        indent=_indent,
        string=_string,
        sum=_sum,
        tojson=tojson,
    )
    return {name: _bounded_filter(name, f) for name, f in filters.items()}


# -- str.format, bounded ------------------------------------------------------------------------


class _SizeCountingFormatter:
    """Counts what each `str.format` field adds, before formatting it (a mixin for Jinja's
    sandboxed formatters)."""

    _total = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._total = len(format_string)
        return super().vformat(format_string, args, kwargs)  # type: ignore[misc]

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion in ("r", "a"):
            check_text_size([value], "a formatted text")  # inside a list: sized as a repr
        return super().convert_field(value, conversion)  # type: ignore[misc]

    def format_field(self, value: Any, format_spec: str) -> Any:
        numbers = [int(run) for run in _digit_runs(format_spec)]
        check_int_arguments(tuple(numbers), {})
        budget = active_limits().max_chars
        self._total += max(numbers, default=0) + 330 + text_size(value, budget)
        check_chars(self._total, "a formatted text")
        return super().format_field(value, format_spec)  # type: ignore[misc]


class _BoundedFormatter(_SizeCountingFormatter, SandboxedFormatter):
    pass


class _BoundedEscapeFormatter(_SizeCountingFormatter, SandboxedEscapeFormatter):
    pass


def _digit_runs(text: str) -> list[str]:
    runs, current = [], ""
    for char in text:
        if char.isdigit():
            current += char
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


# -- the code generator: loops tick, `~` goes through join_checked ----------------------------


class _BoundedCodeGenerator(CodeGenerator):
    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        # `for x in environment.ticking(items)`: one Python call per iteration, where the
        # watchdog checks the clock, even in a loop whose body calls nothing
        ticking = nodes.EnvironmentAttribute("ticking", lineno=node.lineno)
        node = copy.copy(node)
        node.iter = nodes.Call(ticking, [node.iter], [], None, None, lineno=node.lineno)
        super().visit_For(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.join_checked((")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("), context.eval_ctx.autoescape)")


class _GenerationTag(jinja2.ext.Extension):
    """HF's `{% generation %}...{% endgeneration %}` marks assistant text for training masks;
    for a prompt it renders its body unchanged."""

    tags = {"generation"}  # noqa: RUF012 (Jinja's class attribute)

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


# C functions and methods whose integer arguments are positions or keys, never sizes
_LOOKUP_METHODS = {
    "get", "index", "count", "find", "rfind", "rindex", "startswith", "endswith",
    "split", "rsplit",
}  # fmt: skip
_C_CALLABLES = (
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.MethodWrapperType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)


def _size_check_text_method(owner: str | bytes, name: str, args: tuple, kwargs: dict) -> tuple:
    """Size what a str or bytes method would make, before it runs; `join` gets its items as a
    list, since sizing them consumes an iterator."""
    budget = active_limits().max_chars
    if name == "join" and args:
        items = list(args[0])
        check_chars(_joined_size(items, owner, budget), "a joined text")
        return (items, *args[1:])
    if name == "replace" and len(args) >= 2:
        count = args[2] if len(args) > 2 else kwargs.get("count")
        check_chars(_replaced_size(owner, args[0], args[1], count), "a replaced text")
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        tabs = owner.count("\t" if isinstance(owner, str) else b"\t")
        check_chars(len(owner) + tabs * max(tab, 0), "an expanded text")
    elif name == "translate" and args:
        table = args[0]
        entries = table.values() if isinstance(table, Mapping) else table
        widest = max((size_of(entry) for entry in entries), default=1) if entries else 1
        check_chars(len(owner) * max(widest, 1), "a translated text")
    return args


@pass_eval_context
def _finalize(eval_ctx: Any, value: Any) -> Any:
    check_text_size(value, "an output")
    return value


class BoundedSandbox(ImmutableSandboxedEnvironment):
    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols, _GenerationTag],
            optimized=False,
            finalize=_finalize,
            cache_size=0,
        )
        self.filters = _bounded_filters()
        del self.globals["lipsum"]
        self.globals.update(
            range=bounded_range, raise_exception=raise_exception, strftime_now=strftime_now
        )

    # -- what the template may touch --

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # frames, code and generators' insides, on top of Jinja's own list
        if attr.startswith(("gi_", "cr_", "ag_", "f_", "tb_", "co_", "func_", "im_")):
            return False
        return super().is_safe_attribute(obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # even a missing dunder is refused: `''.format.__self__` must fail, not print ""
        if attribute.startswith("__"):
            self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    # -- what the template may build --

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "+" and type(left) is str and type(right) is str:  # the common case, fast
            check_chars(len(left) + len(right), "a joined text")
            return left + right
        binop_size_check(operator, left, right)
        result = self.binop_table[operator](left, right)
        check_value_size(result)
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # C functions and methods allocate in one step; so do Markup's Python wrappers of str
        # methods (`('x'|safe).center(10**9)`). Both get their sizes checked first.
        owner = getattr(__obj, "__self__", None)
        if isinstance(__obj, _C_CALLABLES) or isinstance(owner, str | bytes):
            name = getattr(__obj, "__name__", "")
            if name not in _LOOKUP_METHODS:
                check_int_arguments(args, kwargs)
            if isinstance(owner, str | bytes):
                args = _size_check_text_method(owner, name, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        check_value_size(result)
        return result

    @staticmethod
    def ticking(items: Iterable[Any]) -> Iterator[Any]:
        """A template loop's items, one generator step (a Python call) each."""
        for item in items:  # noqa: UP028 (explicit: each item resumes this frame, a call)
            yield item

    def join_checked(self, parts: tuple, autoescape: bool) -> str:
        """`a ~ b ~ c`: size the texts, then join them."""
        budget = active_limits().max_chars
        total = 0
        for part in parts:
            total += text_size(part, budget)
            check_chars(total, "a joined text")
        return markup_join(parts) if autoescape else str_join(parts)

    def concat(self, parts: Iterable[str]) -> str:  # type: ignore[override]
        """The buffer of a macro, block, `{% set %}` block or `{% filter %}` block."""
        pieces = list(parts)
        check_chars(sum(len(piece) for piece in pieces), "a block of text")
        return "".join(pieces)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`str.format` and `str.format_map`, with Jinja's sandboxed field lookup and sizes."""
        if not isinstance(value, types.MethodType | types.BuiltinMethodType):
            return None
        if value.__name__ not in ("format", "format_map") or not isinstance(value.__self__, str):
            return None
        owner: str = value.__self__
        formatter: SandboxedFormatter
        if isinstance(owner, Markup):
            formatter = _BoundedEscapeFormatter(self, escape=owner.escape)
        else:
            formatter = _BoundedFormatter(self)
        is_format_map = value.__name__ == "format_map"

        def bounded_format(*args: Any, **kwargs: Any) -> str:
            if is_format_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            return type(owner)(formatter.vformat(owner, args, kwargs))

        return functools.update_wrapper(bounded_format, value)


__all__ = ["BoundedSandbox", "Namespace", "TemplateRaised", "tojson"]
