"""Turn 10 of a conversation does not re-process the history: the worker keeps the KV cache of
the turns it has seen, and the chat page sends the same history each turn, so only the new
message (and the template's markers around it) is computed. Real engine, starter model, CPU."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.common.engine_bridge import EngineBridge
from engine.runtime import protocol as p
from tests.app.conftest import open_on_real_engine

pytestmark = pytest.mark.slow


def test_turn_ten_computes_about_as_little_as_turn_two(qtbot, real_engine, starter_model):
    bridge = EngineBridge()
    stats: list[p.GenerationStats] = []
    bridge.generation_done.connect(lambda done: stats.append(done.stats))
    try:
        window = open_on_real_engine(qtbot, starter_model, bridge=bridge)
        chat = window.chat_view
        chat.sampling = p.SamplingParams(temperature=0)
        chat.max_tokens = 6
        for turn in range(10):
            chat.input.setPlainText(f"Name one fruit, please. This is question number {turn}.")
            qtbot.keyClick(chat.input, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: not chat.generating, timeout=120_000)
        assert len(stats) == 10
        second, tenth = stats[1], stats[9]
        computed = [s.n_prompt_tokens - s.n_prompt_tokens_reused for s in stats]
        assert tenth.n_prompt_tokens > 3 * second.n_prompt_tokens / 2  # the history grew
        assert tenth.n_prompt_tokens_reused > 0.7 * tenth.n_prompt_tokens, computed
        # the tokens computed are what time to first token follows; the time itself is not
        # asserted (a clock reading on a shared 2-core machine can be several times another)
        assert computed[9] <= 1.5 * computed[1], computed
    finally:
        bridge.shutdown()
