"""Errors read as sentences: the bad-file banner without Python byte strings, the load-failure
banner with the engine's last lines, and a status bar (and chat header) that no longer describe a
model once the engine is gone."""

from __future__ import annotations

import random

import pytest

from app.shell.main_window import MainWindow
from engine.runtime import protocol as p
from engine.session.model_file import UnusableModelFile, check_model_file
from tests.app.conftest import WAIT_MS, open_in_window, shown
from tests.app.fake_engine import FakeEngineClient, done
from tests.engine.gguf.craft import valid_model


@pytest.fixture
def window(qtbot, bridge) -> MainWindow:
    return shown(qtbot, MainWindow(bridge), 900, 600)


@pytest.fixture
def loaded(qtbot, bridge, window, tmp_path) -> FakeEngineClient:
    model = tmp_path / "Qwen3-0.6B-Q4_K_M.gguf"
    model.write_bytes(valid_model().bytes())
    bridge.start()
    return open_in_window(qtbot, window, model)


def _problem(path) -> str:
    with pytest.raises(UnusableModelFile) as refused:
        check_model_file(path)
    return str(refused.value)


@pytest.mark.parametrize(
    "content, shown",
    [
        (b"this is not a model\n", "it begins with \u201cthis\u201d, not \u201cGGUF\u201d"),
        # fixed bytes: every test process (pytest-xdist) must collect the same parameters
        (
            b"\x00\xff\x10\x80" + random.Random(0).randbytes(60),
            "it begins with the bytes 00 FF 10 80",
        ),
        (b"", "ends at byte 0"),
    ],
    ids=["text", "binary", "empty"],
)
def test_the_bad_file_message_has_no_python_byte_strings(tmp_path, content, shown):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    message = _problem(bad)
    assert message.startswith("\u201cbad.gguf\u201d is not a readable GGUF file: ")
    assert shown in message
    assert "b'" not in message and 'b"' not in message and "\\x" not in message


def test_a_damaged_header_says_where_and_what_to_do(tmp_path):
    model = valid_model()
    data = bytearray(model.bytes())
    data[model.marks["t1.type"]] = 99  # an unknown tensor type
    bad = tmp_path / "damaged.gguf"
    bad.write_bytes(bytes(data))
    message = _problem(bad)
    assert f"byte {model.marks['t1.type']:,}" in message
    assert message.endswith("download it again or pick another file.")


def test_the_load_failure_banner_shows_the_engines_last_lines(
    qtbot, window, bridge, loaded, tmp_path
):
    broken = tmp_path / "broken.gguf"  # a readable header; llama.cpp refuses it
    broken.write_bytes(valid_model().bytes())
    loaded._last_lines = ("llama_model_load: error loading model: missing tensor 'output'",)
    assert window.open_model_file(broken)
    qtbot.waitUntil(lambda: loaded.loads()[-1].path == str(broken), timeout=WAIT_MS)
    loaded.emit(p.LoadFailed(path=str(broken), message="The model could not be loaded."))
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    banner = window.engine_banner
    assert banner.text() == "The model could not be loaded."
    assert banner.details() == "llama_model_load: error loading model: missing tensor 'output'"
    assert window.windowTitle() == "Hearth"
    assert window.placement_label.text() == ""


def test_after_a_crash_nothing_describes_the_gone_model(qtbot, window, bridge, loaded):
    assert window.placement_label.text() and "Qwen3" in window.windowTitle()
    loaded.crash()
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    assert window.model_label.text() == "No model loaded"
    assert window.context_label.text() == ""
    assert window.placement_label.text() == ""
    assert window.windowTitle() == "Hearth"
    assert window.chat_view.header.context_label.text() == "No model"


def test_the_context_counter_belongs_to_the_loaded_model(qtbot, window, bridge, loaded, tmp_path):
    chat = window.chat_view
    chat.input.setPlainText("hello there")
    chat.send()
    request_id = loaded.commands[-1][1][0]
    loaded.emit(p.TokenText(request_id=request_id, text="Hi!"))
    loaded.emit(done(request_id, n_generated=3))  # 20 prompt tokens + 3
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    assert chat.header.context_label.text().startswith(f"Context 23 / {bridge.model.n_ctx:,} (")

    # Another model: its context, and no count made by the first model's tokenizer.
    other = tmp_path / "gemma-3-270m.gguf"
    other.write_bytes(valid_model().bytes())
    open_in_window(qtbot, window, other, n_ctx=1024)
    assert chat.header.context_label.text() == "Context – / 1,024"  # not counted by it yet
    assert "first reply" in chat.header.context_label.toolTip()
