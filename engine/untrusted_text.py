"""Text from model files and from people, made safe to print and to pass on.

A GGUF is written by a stranger. Printed raw, a `general.name` holding `ESC]0;...BEL ESC[2J`
retitles the terminal and clears it, a carriage return overwrites the line with a fake one, and
a Unicode bidi override reorders what follows it on screen. `printable_line` shows every such
character as a visible escape (`\\x1b`, `\\u202e`); it is the one function used wherever text from
a file is printed on one line: `hearth info`, the CLI's messages, the engine's log lines that the
client keeps for crash reports, and the window's labels. `printable_text` is its counterpart for
a model's reply, which is many lines and may rightly hold bidi marks and joiners: only the
control characters a terminal acts on are escaped there.

Text typed or passed on the command line need not be UTF-8. Python hands the bytes it cannot
decode over as lone surrogates (PEP 383, "surrogateescape"), which cannot be encoded again:
`decode_with_replacement` turns them into U+FFFD and counts them, so the caller can say so.
Paths are not text: they keep their surrogates, and `os.fsencode` gives the original bytes back.
"""

from __future__ import annotations

import unicodedata

# General categories shown escaped on one line: controls, format characters (bidi overrides,
# zero-width characters), surrogates, and the Unicode line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_KEPT_IN_REPLIES = frozenset("\n\t")
_ESCAPED_BYTE_FIRST, _ESCAPED_BYTE_LAST = 0xDC80, 0xDCFF  # surrogateescape's range


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if _ESCAPED_BYTE_FIRST <= code <= _ESCAPED_BYTE_LAST:
        return f"\\x{code - 0xDC00:02x}"  # the undecodable byte it stands for
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable_line(text: str) -> str:
    """`text` as one line with every control, format and separator character escaped."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _HIDDEN_CATEGORIES else c for c in text)


def printable_text(text: str) -> str:
    """A model's reply for a terminal: C0 and C1 control characters other than newline and tab
    escaped (ESC, CSI, BEL, carriage return...), and lone surrogates; the rest as it is."""
    if text.isprintable():  # the usual case: no control character at all
        return text
    return "".join(
        _escape(c) if c not in _KEPT_IN_REPLIES and unicodedata.category(c) in ("Cc", "Cs") else c
        for c in text
    )


def decode_with_replacement(text: str) -> tuple[str, int]:
    """(`text` with each undecodable byte replaced by U+FFFD, how many were replaced).

    Undecodable bytes arrive as lone surrogates (from `sys.argv`, or a stream read with
    `errors="surrogateescape"`); any other lone surrogate is replaced too, as nothing can encode
    it."""
    bad = sum(1 for c in text if "\ud800" <= c <= "\udfff")
    if not bad:
        return text, 0
    repaired = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return repaired, bad
