"""A reply's markdown as the HTML subset QTextDocument understands, with highlighted code.

markdown-it-py parses (CommonMark, tables, strikethrough) with raw HTML disabled: a model's output
is untrusted text and must never inject markup, styles or live links into the app. Its link check
already refuses javascript:, vbscript:, file: and data: URLs; the transcript never opens links
anyway, only its own `copy:` and `think:` anchors do something.

Code blocks are highlighted by Pygments with inline colours (QTextDocument has no stylesheet
classes) and drawn as a one-cell table with a header row: the language and a Copy link.
Reasoning between <think> and </think> is split off first and shown collapsed, as one line.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name, guess_lexer
from pygments.util import ClassNotFound

COPY_SCHEME = "copy:"
THINK_HREF = "think:toggle"
LIGHT_STYLE = "default"
DARK_STYLE = "github-dark"
_THINK = re.compile(r"^\s*<think>(.*?)(</think>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class Colors:
    """Hex colours taken from the palette, so light and dark themes both read well."""

    code_background: str
    muted: str
    link: str
    dark: bool


@dataclass(frozen=True)
class Rendered:
    html: str
    code_blocks: tuple[str, ...]  # the text each Copy link copies, by index


@dataclass(frozen=True)
class Thinking:
    reasoning: str | None  # None: the reply has no <think> section
    answer: str
    finished: bool  # </think> was seen (a streaming reply may still be thinking)


def split_thinking(text: str) -> Thinking:
    match = _THINK.match(text)
    if match is None:
        return Thinking(None, text, True)
    return Thinking(match.group(1).strip(), text[match.end() :].lstrip(), bool(match.group(2)))


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    return md


_MD = _parser()


def _lexer(language: str, code: str):
    try:
        return get_lexer_by_name(language) if language else guess_lexer(code)
    except ClassNotFound:
        return TextLexer()


def _code_block_html(code: str, language: str, index: int, colors: Colors) -> str:
    formatter = HtmlFormatter(
        noclasses=True, nowrap=True, style=DARK_STYLE if colors.dark else LIGHT_STYLE
    )
    body = highlight(code, _lexer(language, code), formatter).rstrip("\n")
    label = html.escape(language or "code")
    return (
        f'<table width="100%" cellspacing="0" cellpadding="6" '
        f'bgcolor="{colors.code_background}" style="margin-top:6px; margin-bottom:6px;">'
        f'<tr><td><span style="color:{colors.muted}; font-size:small;">{label}</span></td>'
        f'<td align="right"><a href="{COPY_SCHEME}{index}" '
        f'style="color:{colors.link}; text-decoration:none; font-size:small;">Copy</a></td></tr>'
        f'<tr><td colspan="2"><pre style="margin:0;">{body}</pre></td></tr></table>'
    )


def render_markdown(text: str, colors: Colors, *, show_thinking: bool = False) -> Rendered:
    thinking = split_thinking(text)
    blocks: list[str] = []
    tokens = _MD.parse(thinking.answer)
    parts: list[str] = []
    start = 0
    # Fences are rendered here (highlighted, with a Copy link); the rest by markdown-it.
    for i, token in enumerate(tokens):
        if token.type in ("fence", "code_block"):
            parts.append(_MD.renderer.render(tokens[start:i], _MD.options, {}))
            language = token.info.strip().split(" ")[0] if token.type == "fence" else ""
            code = token.content.rstrip("\n")
            parts.append(_code_block_html(code, language, len(blocks), colors))
            blocks.append(code)
            start = i + 1
    parts.append(_MD.renderer.render(tokens[start:], _MD.options, {}))
    body = "".join(parts).strip()  # a trailing newline would show as a space
    return Rendered(_thinking_html(thinking, colors, show_thinking) + body, tuple(blocks))


def _thinking_html(thinking: Thinking, colors: Colors, show: bool) -> str:
    if thinking.reasoning is None:
        return ""
    words = len(thinking.reasoning.split())
    state = "Thought" if thinking.finished else "Thinking…"
    arrow = "▾" if show else "▸"
    head = (
        f'<p><a href="{THINK_HREF}" style="color:{colors.muted}; text-decoration:none;">'
        f"{arrow} {state} ({words} words)</a></p>"
    )
    if not show:
        return head
    body = html.escape(thinking.reasoning).replace("\n", "<br>")
    return head + f'<p style="color:{colors.muted}; font-style:italic;">{body}</p>'
