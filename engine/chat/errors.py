"""The one error chat-template code raises: a sentence the GUI can show as it is."""

from __future__ import annotations

import re
from typing import Literal

FailureKind = Literal["syntax", "refused", "unsafe", "limit", "error", "builtin"]

_ADVICE: dict[FailureKind, str] = {
    "syntax": (
        "The template stored in this model file is broken: a built-in chat format can be used "
        "instead, or get a corrected file from the model's publisher."
    ),
    "refused": (
        "The template rejects this conversation (many require user and assistant turns to "
        "alternate, or allow no system prompt): change the conversation, or use a built-in "
        "chat format."
    ),
    "unsafe": (
        "Hearth never lets a template reach Python internals, and one that tries may be "
        "malicious: use a built-in chat format, and consider deleting this model file."
    ),
    "limit": (
        "Hearth stopped it: use a built-in chat format for this model. No published template "
        "needs that much, so distrust this file: get the model from its publisher again."
    ),
    "error": (
        "A built-in chat format can be used instead; if replies look wrong, report the "
        "template to the model's publisher."
    ),
    "builtin": "Start a new chat; if it happens again, report it with the model's name.",
}
_MAX_REASON_CHARS = 300


class ChatTemplateError(Exception):
    """A chat template could not be rendered.

    `str(error)` says what happened and what to do; `reason` is the short cause on its own (for
    "built-in 'chatml' (the model's template failed: <reason>)"); `kind` lets the GUI tell a
    broken template from a hostile one.
    """

    def __init__(self, message: str, *, reason: str = "", kind: FailureKind = "error") -> None:
        super().__init__(message)
        self.reason = reason or message
        self.kind: FailureKind = kind


def clean_reason(text: str) -> str:
    """One line, no control characters, not too long: the text may come from the template."""
    text = text[: 4 * _MAX_REASON_CHARS]
    text = re.sub(r"\s+", " ", "".join(c if c.isprintable() else " " for c in text)).strip()
    if len(text) > _MAX_REASON_CHARS:
        text = text[: _MAX_REASON_CHARS - 1].rstrip() + "…"
    return text.rstrip(".") or "no details given"


def template_failure(kind: FailureKind, reason: str) -> ChatTemplateError:
    reason = clean_reason(reason)
    return ChatTemplateError(
        f"The model's chat template failed: {reason}. {_ADVICE[kind]}", reason=reason, kind=kind
    )


def builtin_failure(name: str, reason: str) -> ChatTemplateError:
    reason = clean_reason(reason)
    return ChatTemplateError(
        f"llama.cpp's built-in '{name}' chat format failed: {reason}. {_ADVICE['builtin']}",
        reason=reason,
        kind="builtin",
    )
