"""WCAG contrast arithmetic, and the muted text colour that stays readable."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor

from app.common.theme import AA_TEXT, contrast, muted_text

WHITE, BLACK = QColor(255, 255, 255), QColor(0, 0, 0)


@pytest.mark.parametrize(
    ("fg", "bg", "ratio"),
    [
        (BLACK, WHITE, 21.0),
        (WHITE, WHITE, 1.0),
        (QColor(118, 118, 118), WHITE, 4.54),  # the lightest grey that passes AA on white
        (QColor(0, 0, 0, 128), WHITE, 4.00),  # Qt's placeholder: the text at half alpha
    ],
)
def test_contrast(fg, bg, ratio):
    assert contrast(fg, bg) == pytest.approx(ratio, abs=0.01)


@pytest.mark.parametrize(
    ("text", "backgrounds"),
    [(BLACK, [WHITE, QColor(239, 239, 239)]), (QColor(232, 232, 232), [QColor(28, 28, 30)])],
)
def test_muted_text_is_quieter_yet_reads_at_aa(text, backgrounds):
    muted = muted_text(text, backgrounds)
    assert muted != text
    assert all(contrast(muted, bg) >= AA_TEXT for bg in backgrounds)
