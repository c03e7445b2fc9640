"""The GUI decode benchmark on the starter model (CPU): every figure is there and they agree."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("llama_cpp")

from benchmarks.gui_decode import (
    GuiDecodeConfig,
    comparison_rows,
    format_report,
    run_gui_decode,
)

pytestmark = pytest.mark.slow  # the real engine worker, about 2 s on an idle machine

TOKENS = 16


def test_replies_stream_through_the_chat_view_and_every_figure_is_measured(
    qtbot, starter_model, tmp_path
):
    screenshot = tmp_path / "window.png"
    config = GuiDecodeConfig(
        model=str(starter_model), tokens=TOKENS, reps=2, warmup_tokens=2, screenshot=str(screenshot)
    )
    report = run_gui_decode(config)

    assert report["devices"] and report["cpu"] and "offscreen" in report["qt"]
    assert len(report["runs"]) == 2
    for run in report["runs"]:
        assert run["stop_reason"] == "max_tokens"
        # English text: one piece of text per token, all of them shown.
        assert run["worker_tokens"] == run["gui_pieces"] == TOKENS
        assert run["worker_tok_s"] > 0 and run["gui_tok_s"] > 0
        assert 0.5 < run["gui_tok_s"] / run["worker_tok_s"] < 2.0
        assert run["gui_updates"] == run["bridge_flushes"] >= 2
        # The markdown is rendered again on every update, and the view repainted.
        assert run["markdown_renders"] >= run["gui_updates"]
        assert run["markdown_render_s"] > 0
        assert run["transcript_repaints"] >= 1
        assert 0 < run["gui_first_text_s"] < 60
    gui_rates = sorted(r["gui_tok_s"] for r in report["runs"])
    assert report["gui_decode_tok_s"] == pytest.approx(sum(gui_rates) / 2)
    assert report["markdown_in_last_reply"]  # the final reply rendered to some HTML
    assert screenshot.stat().st_size > 0

    reference = 48.0  # a llama-bench figure made up here: only the arithmetic is checked
    report["llama_bench"] = {
        "note": "llama-bench",
        "test": "tg128",
        "tok_s": reference,
        "stddev": 0,
    }
    rows = comparison_rows(report)
    assert [r.ratio for r in rows] == pytest.approx(
        [report["gui_decode_tok_s"] / reference, report["worker_decode_tok_s"] / reference]
    )
    text = format_report(report, rows)
    assert "GUI decode (tok/s)" in text and "reply 2:" in text
