"""benchmarks/kernels/attention_sass.py: the decode attention compiled for sm_90 without a GPU."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("triton", reason="compiling the kernels needs triton")

from benchmarks.kernels import attention_sass


def _loop_instructions(k_fmt: str, v_fmt: str, unpack: str) -> int:
    sass, _usage = attention_sass.sass_of(attention_sass.compile_sm90(k_fmt, v_fmt, unpack))
    return len(attention_sass.sass_loop_body(sass))


def test_the_loop_body_is_the_longest_backward_branch():
    listing = "\n".join(
        f"        /*{addr:04x}*/                   {op} ;"
        for addr, op in [
            (0x0000, "MOV R1, c[0x0][0x28]"),
            (0x0010, "IADD3 R2, R2, 0x1, RZ"),  # a short loop: 0x10..0x20
            (0x0020, "@P0 BRA 0x10"),
            (0x0030, "HMMA.16816.F32 R4, R8, R12, R4"),  # the long one: 0x30..0x50
            (0x0040, "LOP3.LUT R5, R5, 0xf, RZ, 0xc0, !PT"),
            (0x0050, "@P1 BRA 0x30"),
            (0x0060, "EXIT"),
        ]
    )
    body = attention_sass.sass_loop_body(listing)
    ops = [line.split("*/")[1].split()[0] for line in body]
    assert ops == ["HMMA.16816.F32", "LOP3.LUT", "@P1"]


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") == "1" or not attention_sass.CUOBJDUMP.exists(),
    reason="needs triton's compiler (not its interpreter) and its bundled cuobjdump",
)
def test_words_unpacking_cuts_the_rot4_page_step():
    """The default rot4 unpacking (AttentionTuning.code_unpack = "words") must stay clearly
    cheaper than the byte-wise one it replaced (872 -> 573 instructions with Triton 3.8)."""
    words = _loop_instructions("rot4", "rot4", "words")
    by_bytes = _loop_instructions("rot4", "rot4", "bytes")
    assert words < 0.8 * by_bytes
