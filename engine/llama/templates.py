"""llama.cpp's built-in chat formats (llama_chat_builtin_templates, llama_chat_apply_template).

llama_cpp is imported inside the functions, so that importing this module loads no library.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence


@functools.cache
def builtin_names() -> tuple[str, ...]:
    """The names llama.cpp knows, e.g. ("bailing", ..., "chatml", ..., "zephyr")."""
    import llama_cpp

    count = llama_cpp.llama_chat_builtin_templates(None, 0)
    names = (ctypes.c_char_p * count)()
    llama_cpp.llama_chat_builtin_templates(names, count)
    return tuple(name.decode("utf-8") for name in names)


def _c_text(text: str) -> bytes:
    # C strings end at the first NUL, which would silently cut a message short
    return text.encode("utf-8", "replace").replace(b"\x00", b"")


def apply_template(
    template: bytes, turns: Sequence[tuple[str, str]], add_assistant: bool
) -> str | None:
    """llama_chat_apply_template, with the buffer grown to fit; None if llama.cpp does not know
    the template."""
    import llama_cpp

    encoded = [(_c_text(role), _c_text(content)) for role, content in turns]
    chat = (llama_cpp.llama_chat_message * len(encoded))()
    for slot, (role, content) in zip(chat, encoded, strict=True):
        slot.role, slot.content = role, content  # `encoded` keeps the bytes alive
    size = 2 * sum(len(role) + len(content) for role, content in encoded) + 256
    while True:
        buffer = ctypes.create_string_buffer(size)
        written = llama_cpp.llama_chat_apply_template(
            template, chat, len(encoded), add_assistant, buffer, size
        )
        if written < 0:
            return None
        if written <= size:
            return buffer.raw[:written].decode("utf-8", "replace")
        size = written
