"""Text from a model file in the window: file names and metadata shown as written (no HTML, no
control characters acting), a refused chat template said in the chat header and above the
transcript, llama.cpp's error lines shown first in crash and load-failure details."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt

from app.common import banner as b
from app.shell.main_window import MainWindow
from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from tests.app.conftest import WAIT_MS, client_of, shown
from tests.app.fake_engine import model_loaded
from tests.engine.gguf.craft import VALID_TENSORS, valid_model
from tests.engine.hostile_gguf import TERMINAL_ATTACK

HOSTILE_NAME = "<img src='x.png'><b>Evil\x1b]0;pwned\x07\u202egguf.exe.gguf"  # no '/': a file
REFUSED = (
    "The model's chat template failed: it tried an unsafe operation (access to attribute "
    "'__class__' of 'str' object is unsafe). Hearth never lets a template reach Python "
    "internals, and one that tries may be malicious: use a built-in chat format, and consider "
    "deleting this model file. Chats are written in llama.cpp's built-in 'chatml' format."
)


@pytest.fixture
def window(qtbot, bridge) -> MainWindow:
    return shown(qtbot, MainWindow(bridge), 900, 600)


def load(qtbot, window, bridge, path, **fields) -> p.ModelLoaded:
    bridge.start()
    bridge.load(p.ModelParams(path=str(path)))
    event = dataclasses.replace(model_loaded(str(path)), **fields)
    client_of(bridge).emit(event)
    qtbot.waitUntil(lambda: window.bridge.model is not None, timeout=WAIT_MS)
    return event


def test_a_hostile_file_name_and_description_are_shown_as_written(
    qtbot, window, bridge, tmp_path
) -> None:
    path = tmp_path / HOSTILE_NAME
    path.write_bytes(b"")
    load(qtbot, window, bridge, path, description=TERMINAL_ATTACK)
    label = window.model_label
    assert label.textFormat() == Qt.TextFormat.RichText  # for its own link: the name is escaped
    assert "&lt;img src='x.png'&gt;&lt;b&gt;Evil\\x1b]0;pwned\\x07\\u202e" in label.text()
    assert "<img" not in label.text() and "\x1b" not in label.text()
    tooltip = label.toolTip()
    assert tooltip.startswith("<qt>") and "<img" not in tooltip and "\x1b" not in tooltip
    assert "Evil\\x1b]0;pwned\\x07" in window.windowTitle()
    assert "\x1b" not in window.windowTitle() and "\u202e" not in window.windowTitle()


def test_banners_show_file_text_as_plain_text(qtbot, window) -> None:
    window.file_banner.show_message(b.ERROR, f"Can't open {HOSTILE_NAME}", "<b>bold</b>\x1b[2J")
    title = window.file_banner.findChild(type(window.model_label), "bannerTitle")
    assert title.textFormat() == Qt.TextFormat.PlainText
    assert window.file_banner.title() == (
        "Can't open <img src='x.png'><b>Evil\\x1b]0;pwned\\x07\\u202egguf.exe.gguf"
    )
    assert window.file_banner.text() == "<b>bold</b>\\x1b[2J"


def test_a_refused_chat_template_is_shown_with_the_advice(qtbot, window, bridge, tmp_path) -> None:
    path = tmp_path / "evil.gguf"
    path.write_bytes(b"")
    load(qtbot, window, bridge, path, chat_template="llama.cpp's built-in 'chatml' format",
         chat_template_problem=REFUSED)  # fmt: skip
    header, notice = window.chat_view.header, window.chat_view.notice
    assert header.template_warning.isVisible()
    assert "consider deleting this model file" in header.template_warning.toolTip()
    assert notice.isVisible() and notice.title() == "This model's chat template was refused"
    assert "consider deleting this model file" in notice.text()

    other = tmp_path / "good.gguf"
    other.write_bytes(b"")
    load(qtbot, window, bridge, other)  # a model whose template is fine: the warning goes
    qtbot.waitUntil(lambda: not header.template_warning.isVisible(), timeout=WAIT_MS)
    assert not notice.isVisible()


def test_a_template_that_fails_mid_chat_shows_the_warning(qtbot, window, bridge, tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"")
    load(qtbot, window, bridge, path)
    header = window.chat_view.header
    assert not header.template_warning.isVisible()
    fallback = (
        "llama.cpp's built-in 'chatml' format, which the model's template matches (that "
        "template failed: it refused the conversation: “no system role”)"
    )
    client_of(bridge).emit(p.ChatTemplateChanged(template=fallback))
    qtbot.waitUntil(header.template_warning.isVisible, timeout=WAIT_MS)
    assert "no system role" in header.template_warning.toolTip()


def test_a_crash_shows_llama_cpps_cause_before_the_backtrace(qtbot, window, bridge, tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"")
    load(qtbot, window, bridge, path)
    cause = "binary-ops.cpp:135: binary_op: unsupported types: dst: f32, src0: f32, src1: i32"
    frames = tuple(f"#{i} 0x7f in frame_{i} ()" for i in range(40))
    client_of(bridge).emit(EngineCrashed(exit_code=-6, last_lines=frames, cause_lines=(cause,)))
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    details = window.engine_banner.details().splitlines()
    assert details[:2] == ["llama.cpp said:", f"  ! {cause}"]
    assert details[-1] == "  | #39 0x7f in frame_39 ()"


def test_a_failed_load_offers_llama_cpps_own_lines(qtbot, window, bridge, tmp_path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"")
    bridge.start()
    bridge.load(p.ModelParams(path=str(path)))
    said = ("llama_model_load: error loading model: missing tensor 'output_norm.weight'",)
    client_of(bridge).emit(p.LoadFailed(path=str(path), message="could not load", details=said))
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    assert window.engine_banner.details() == said[0]


def test_a_file_llama_cpp_would_abort_on_is_refused_when_opened(qtbot, window, tmp_path) -> None:
    tensors = [(n, s, "I32" if n == "blk.1.ffn_norm.weight" else k) for n, s, k in VALID_TENSORS]
    path = tmp_path / "i32-norm.gguf"
    path.write_bytes(valid_model(tensors=tensors).bytes())
    assert not window.open_model_file(path)
    assert window.file_banner.isVisible()
    assert "blk.1.ffn_norm.weight is typed I32" in window.file_banner.text()
