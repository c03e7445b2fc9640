"""Render a model's chat template (`tokenizer.chat_template` in the GGUF) into a prompt.

The template comes from a downloaded file, so it is untrusted code: CVE-2024-34359
("Llama Drama") was llama-cpp-python rendering it in a plain jinja2 Environment, where
`{{ ''.__class__.__mro__[1].__subclasses__() }}` reaches `os.popen`. Here it runs in
`engine.chat.sandbox.BoundedSandbox`, an ImmutableSandboxedEnvironment set up as Hugging Face
transformers renders templates, in which any reach for Python internals fails the render, and
every compile and render is bounded three ways:

- size: each operation that can grow a value is sized before it runs (`engine.chat.limits`),
  every value made is measured, and the output is streamed and counted (`max_output_chars`
  caps the prompt and every value on the way);
- time: a trace function checks a deadline at every Python call, and every template loop makes
  one call per iteration, so a loop that calls nothing stops too (`engine.chat.watchdog`);
- memory: the same trace function checks the process's anonymous memory every 5 ms, for
  templates that keep many values alive rather than make one huge one.

Any failure becomes a ChatTemplateError whose message says what happened and what to do.

What still escapes, known and accepted:

- A single call into C runs to completion: nothing interrupts one `sorted()` or `str.count()`.
  Its inputs are within the size limit, so this is at most about a second past the deadline
  (sorting a list of four million items is the worst found). The same holds for a loop inside
  Jinja's own filters that makes no Python call per item: it runs over bounded inputs.
- An operation that grows a value by a constant factor (`|escape` up to 6x, `|tojson` with
  `ensure_ascii` up to 12x) is measured after it runs, so one such value can briefly take that
  factor times `max_output_chars`. Lists made by C methods (`text.split()`) hold an object per
  piece, about 50 bytes per character of a value at the size limit.
- The memory check samples, so a render can pass `max_memory_bytes` by what it allocates in
  5 ms (tens of MiB at memory speed). Outside Linux it reads the resident size, which also
  counts file pages the engine touches meanwhile.
- Rendering holds the thread it runs on. The engine worker is a separate process that the GUI
  can kill: the last line of defence, not a reason to skip the limits above.

And what the bounds cost real templates: an integer argument over 100,000 (a width, a count, a
`range` bound) is refused even where it would be harmless; `lipsum`, `pprint`, `urlize` and
`wordwrap` do not exist; a template over 200,000 characters is refused. No published chat
template needs any of these, and a refused template falls back to a built-in format.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from jinja2.sandbox import SecurityError

from engine.chat.errors import ChatTemplateError, template_failure
from engine.chat.limits import LimitExceeded, RenderLimits, check_chars, limits_in_force
from engine.chat.sandbox import BoundedSandbox, TemplateRaised
from engine.chat.watchdog import watchdog

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_OUTPUT_CHARS = 4_000_000
DEFAULT_MAX_MEMORY_BYTES = 256 * 1024 * 1024
# Real templates, tool-calling ones included, are under 50 kB. The cap also bounds what literals
# can do: 10,000 colliding integer keys cost a dict well under a second to build.
MAX_TEMPLATE_CHARS = 200_000
_MAX_MESSAGE_DEPTH = 32


def render_chat_template(
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    variables: Mapping[str, Any] | None = None,
) -> str:
    """The prompt `source` makes of `messages`, as transformers' `apply_chat_template` would.

    `messages` are `{"role": ..., "content": ...}` mappings (content may also be JSON-like data,
    for templates that take it); `variables` adds template variables such as `enable_thinking`.
    The template sees copies, never the caller's objects. The BOS text is left as the template
    writes it: see `engine.chat.prompt.strip_leading_bos`.
    """
    if len(source) > MAX_TEMPLATE_CHARS:
        raise template_failure(
            "limit", f"it is {len(source):,} characters long (the limit is {MAX_TEMPLATE_CHARS:,})"
        )
    context: dict[str, Any] = {"tools": None, "documents": None}
    context.update(_plain(dict(variables or {})))
    context.update(
        messages=_plain(list(messages)),
        bos_token=str(bos_token),
        eos_token=str(eos_token),
        add_generation_prompt=bool(add_generation_prompt),
    )
    limits = RenderLimits(timeout_s, max_output_chars, max_memory_bytes)
    try:
        with limits_in_force(limits), watchdog(limits):
            return _stream(_compile(source), context)
    except LimitExceeded as exc:
        raise template_failure("limit", exc.reason) from None
    except TemplateRaised as exc:
        raise template_failure("refused", f"it refused the conversation: “{exc}”") from None
    except SecurityError as exc:
        raise template_failure("unsafe", f"it tried an unsafe operation ({exc})") from None
    except jinja2.TemplateSyntaxError as exc:
        raise template_failure(
            "syntax", f"syntax error on line {exc.lineno}: {exc.message}"
        ) from None
    except RecursionError:
        raise template_failure("limit", "it recursed too deeply") from None
    except MemoryError:
        raise template_failure("limit", "it ran out of memory") from None
    except Exception as exc:
        raise template_failure("error", f"{type(exc).__name__}: {exc}") from None


def _stream(template: jinja2.Template, context: dict[str, Any]) -> str:
    pieces: list[str] = []
    total = 0
    rendering = template.generate(context)
    try:
        for piece in rendering:
            total += len(piece)
            check_chars(total, "a prompt")
            pieces.append(piece)
    finally:
        rendering.close()
    return "".join(pieces)


@functools.lru_cache(maxsize=8)  # a model's template is rendered every turn
def _compile(source: str) -> jinja2.Template:
    return _sandbox().from_string(source)


@functools.cache
def _sandbox() -> BoundedSandbox:
    return BoundedSandbox()


def _plain(value: Any, depth: int = 0) -> Any:
    """A copy made of plain dicts, lists, str, int, float, bool and None only."""
    if depth > _MAX_MESSAGE_DEPTH:
        raise ChatTemplateError("A chat message is nested too deeply to format.", kind="error")
    if value is None or type(value) in (str, bool, int, float):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, depth + 1) for item in value]
    raise TypeError(f"chat messages hold text, numbers, lists and mappings, not {type(value)!r}")
