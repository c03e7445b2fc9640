"""Text from files and people: escaped for printing, undecodable bytes replaced and counted."""

from __future__ import annotations

import os

import pytest

from engine.untrusted_text import decode_with_replacement, printable_line, printable_text
from tests.engine.hostile_gguf import TERMINAL_ATTACK


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("SmolLM2 135M", "SmolLM2 135M"),
        ("Qwen3 中文 模型", "Qwen3 中文 模型"),  # other scripts are text, not controls
        ("a\x1b]0;title\x07b", "a\\x1b]0;title\\x07b"),
        ("a\x1b[2Jb\rc\nd\te", "a\\x1b[2Jb\\x0dc\\x0ad\\x09e"),
        ("\x9b31m", "\\x9b31m"),  # C1 CSI: one byte that starts an escape sequence
        ("abc\u202edef", "abc\\u202edef"),  # right-to-left override
        ("x\u2028y", "x\\u2028y"),  # line separator
        ("m\udcff.gguf", "m\\xff.gguf"),  # a path byte that is not UTF-8 (surrogateescape)
        ("\ud800", "\\ud800"),
    ],
)
def test_printable_line_escapes_what_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert printable_line(text) == shown
    printable_line(text).encode("utf-8")  # and it can always be written


def test_the_terminal_attack_in_a_model_name_is_shown_inert() -> None:
    shown = printable_line(TERMINAL_ATTACK)
    assert all(c.isprintable() for c in shown)
    assert shown.startswith("Evil\\x1b]0;pwned\\x07\\x1b[2J\\x0dFAKE")


def test_printable_text_keeps_lines_tabs_and_joiners_of_a_reply() -> None:
    reply = "Line one\n\tindented 👩\u200d💻 \u200fשלום"
    assert printable_text(reply) == reply
    assert printable_text("ok\x1b[2J\rgone\x07") == "ok\\x1b[2J\\x0dgone\\x07"


def test_undecodable_bytes_are_replaced_and_counted() -> None:
    typed = os.fsdecode(b"hi\xff there \xfe\xfd")  # what input() gives with surrogateescape
    text, replaced = decode_with_replacement(typed)
    assert (text, replaced) == ("hi\ufffd there \ufffd\ufffd", 3)
    text.encode("utf-8")
    assert decode_with_replacement("plain é") == ("plain é", 0)
